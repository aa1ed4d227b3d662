# scripts/bench-rtl.sh's figure, drawn by scripts/plot/plot.py from ina-rtl-bench's lines: per
# order (same-slot, interleaved) against K, the beat efficiency (ceiling 1), the frames' line rate
# at 250 MHz beside one beat per cycle and the 512-bit bus (128 Gbit/s), and the Verilator model's
# cycles per CPU second beside issue #13's floor of 1 M.
# dir/order<i>.tsv: K, beat_efficiency, line_rate_gbps, one_beat_per_cycle_gbps, M cycles/cpu-s,
# M cycles/s (wall).
set terminal pngcairo size 1500,560 noenhanced
set output out
set datafile separator "\t"
set multiplot layout 1,3 title (strlen(note) > 0 ? title."\n".note : title)
set logscale x 2
set xrange [48:2800]
set xtics (64, 256, 512, 1024, 2048)
set xlabel "elements per packet K"
set grid
set key bottom right opaque
set ylabel "beat efficiency (beats taken / cycles)"
set yrange [0:1.1]
plot 1 with lines dt 2 lw 2 lc rgb 'black' title 'ceiling: a beat every cycle', \
     for [i=1:norders] sprintf('%s/order%d.tsv', dir, i) using 1:2 with linespoints pt (5 + 2 * i) \
       ps 1.4 lw 2 lc i title orders[i]
set ylabel "frames through the core at 250 MHz (Gbit/s)"
set yrange [0:140]
plot 128 with lines dt 2 lw 2 lc rgb 'black' title 'bus: 512 bits x 250 MHz', \
     sprintf('%s/order1.tsv', dir) using 1:4 with lines lw 8 lc rgb 'light-gray' \
       title 'one beat per cycle (K/16 + 2 beats a frame)', \
     for [i=1:norders] sprintf('%s/order%d.tsv', dir, i) using 1:3 with linespoints pt (5 + 2 * i) \
       ps 1.4 lw 2 lc i title orders[i]
set ylabel "simulation speed (M cycles per second)"
set yrange [0:*]
plot 1 with lines dt 2 lw 2 lc rgb 'black' title 'floor: 1 M cycles/s (issue #13)', \
     for [i=1:norders] sprintf('%s/order%d.tsv', dir, i) using 1:5 with linespoints pt (5 + 2 * i) \
       ps 1.4 lw 2 lc i title orders[i].', per CPU second', \
     for [i=1:norders] sprintf('%s/order%d.tsv', dir, i) using 1:6 with points pt (4 + 2 * i) \
       ps 1.2 lc i title orders[i].', per wall second'
unset multiplot
