# scripts/scale-sim.sh's figures (docs/scale.md), drawn by scripts/plot/plot.py from the sweeps'
# JSON lines. fig: size | workers | contention; dir/<fig>.tsv:
#   size: workers, elements, ina_ms, ina_bound_ms, ring_ms, ring_closed_ms
#   workers: workers, ina_ms, ring_ms, ring_closed_ms, S_over_B_ms
#   contention: oversub, jobs, ina_max_ms, ring_max_ms
set terminal pngcairo size 900,600 noenhanced
set output out
set datafile separator "\t"
set grid
mib(n) = n * 4.0 / 1048576
sub = (strlen(note) > 0 ? "\n".note : "")
if (fig eq 'size') {
  set title "all-reduce time vs size: two-level fat tree (leaves of 32), 100 Gbit/s, 1 us/hop, 5 us/ring step".sub
  set xlabel "tensor size (MiB of float32)"
  set ylabel "time per all-reduce (ms)"
  set logscale xy
  set key top left
  f = dir.'/size.tsv'
  sel(n, v) = ($1 == n) ? v : NaN
  plot f using (sel(64, mib($2))):4 with lines dashtype 2 lw 1 lc rgb "gray" title "ina line-rate bound S(1+h)/B", \
       f using (sel(64, mib($2))):3 with linespoints pt 7 lw 2 lc rgb "blue" title "ina, 64 workers", \
       f using (sel(1024, mib($2))):3 with linespoints pt 6 lw 2 lc rgb "dark-blue" title "ina, 1024 workers", \
       f using (sel(64, mib($2))):5 with linespoints pt 5 lw 2 lc rgb "red" title "ring, 64 workers", \
       f using (sel(1024, mib($2))):5 with linespoints pt 4 lw 2 lc rgb "dark-red" title "ring, 1024 workers", \
       f using (sel(1024, mib($2))):6 with lines dashtype 3 lw 1 lc rgb "dark-red" title "ring closed form, 1024"
}
if (fig eq 'workers') {
  set title "time / (S/B) vs workers, 16 MiB, two-level fat tree, 100 Gbit/s".sub
  set xlabel "workers"
  set ylabel "all-reduce time / (S/B)  (S/B: the tensor's bytes at one link's rate)"
  set logscale x 2
  set logscale y
  set key top left
  f = dir.'/workers.tsv'
  plot f using 1:($2/$5) with linespoints pt 7 lw 2 lc rgb "blue" title "ina (sim)", \
       f using 1:($3/$5) with linespoints pt 5 lw 2 lc rgb "red" title "ring (sim)", \
       f using 1:($4/$5) with lines dashtype 3 lw 1 lc rgb "dark-red" title "ring closed form (bandwidth + 2(n-1) step latency)", \
       f using 1:(2.0*($1-1)/$1) with lines dashtype 2 lw 1 lc rgb "black" title "2(n-1)/n"
}
if (fig eq 'contention') {
  set title "jobs sharing 256 workers (leaves of 16, jobs dealt over all leaves), 16 MiB each".sub
  set xlabel "concurrent jobs (256 / jobs workers each)"
  set ylabel "slowest job's all-reduce (ms)"
  set logscale x 2
  set key top right
  f = dir.'/contention.tsv'
  sel(o, v) = ($1 == o) ? v : NaN
  plot f using 2:(sel(1, $3)) with linespoints pt 7 lw 2 lc rgb "blue" title "ina, 1:1 uplinks", \
       f using 2:(sel(4, $3)) with linespoints pt 6 lw 2 lc rgb "dark-blue" title "ina, 4:1 oversubscribed", \
       f using 2:(sel(1, $4)) with linespoints pt 5 lw 2 lc rgb "red" title "ring, 1:1 uplinks", \
       f using 2:(sel(4, $4)) with linespoints pt 4 lw 2 lc rgb "dark-red" title "ring, 4:1 oversubscribed"
}
