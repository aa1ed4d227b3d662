// One diagnostic line, written with one write(2). The ranks of a job usually share one stderr (a
// launcher's pipe, a test reading all ranks at once), and stdio does not keep a line whole there:
// glibc 2.37 and later format to unbuffered stderr through a 128-byte stage and write each stage
// as it fills, so another rank's line can land inside this one (seen: torch's 4-rank fallback
// test read "...makes thisina_torch: rank 2: WARNING: ..."). A write of up to PIPE_BUF (4096)
// bytes to a pipe is atomic, so lines up to that long never interleave; longer ones are written
// whole but, on a pipe, may be split by the kernel.
#pragma once

#include <string_view>

namespace ina {

// `line` to `fd`, a newline added where `line` lacks one; retried on EINTR and short writes.
// Errors are ignored (there is nowhere left to report them).
void WriteLine(int fd, std::string_view line);

// printf-formatted, then WriteLine(2, ...): the drop-in for fprintf(stderr, ...) of a line.
void LogLinef(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace ina
