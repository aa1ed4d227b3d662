# scripts/bench-switch-scaling.sh's figure, drawn by scripts/plot/plot.py: packets/s the switch
# handled against its cores, per run (one job per core, or one job on every core), with the ideal
# N x (the 1-core rate) and the scaling target 0.7 N x it.
# dir/run<i>.tsv: cores, switch_pps, workers_pps, pinned (1/0); dir/ref<i>.tsv: N, ideal, target.
set terminal pngcairo size 1000,750 noenhanced
set output out
set title (strlen(note) > 0 ? title."\n".note : title)
set datafile separator "\t"
set xlabel "switch cores N (ina-switchd --cores N)"
set ylabel "packets per second (millions)"
set xrange [0.5:8.5]
set xtics (1, 2, 4, 8)
set yrange [0:*]
set grid
set key below left Left reverse maxcols 1
M(v) = v / 1e6
pin(p, v) = (p == 1) ? v : NaN
unpin(p, v) = (p == 0) ? v : NaN
plot for [i=1:nruns] sprintf('%s/ref%d.tsv', dir, i) using 1:(M($2)) with lines dt 2 lw 1.5 lc i \
       title ('ideal: N x 1 core'.(nruns > 1 ? ' ('.names[i].')' : '')), \
     for [i=1:nruns] sprintf('%s/ref%d.tsv', dir, i) using 1:(M($3)) with lines dt 3 lw 1.5 lc i \
       title ('target: 0.7 N x 1 core'.(nruns > 1 ? ' ('.names[i].')' : '')), \
     for [i=1:nruns] sprintf('%s/run%d.tsv', dir, i) using 1:(M(pin($4, $2))) with linespoints pt 7 ps 1.5 lw 2 lc i \
       title ('switch (rx_data / wall time): '.names[i]), \
     for [i=1:nruns] sprintf('%s/run%d.tsv', dir, i) using 1:(M(unpin($4, $2))) with points pt 6 ps 1.5 lc i \
       notitle, \
     for [i=1:nruns] sprintf('%s/run%d.tsv', dir, i) using 1:(M($3)) with points pt 4 ps 1.2 lc i \
       title 'sum of the workers'' own rates'
