# Plots scripts/testbed.sh's summary.tsv: all-reduce time against tensor size for ina, its
# line-rate bound, Gloo's ring and MPI_Allreduce. Run as
#   gnuplot -e "data='summary.tsv'; out='testbed.png'; title='4 workers, 200mbit'" plot_testbed.gp
# Columns: elements, ina_ms, bound_ms, gloo_ms, mpi_ms, ina_dpdk_ms (-1: not measured).
if (!exists("data")) data = 'summary.tsv'
if (!exists("out")) out = 'testbed.png'
if (!exists("title")) title = ''
set terminal pngcairo size 900,600 noenhanced
set output out
set title "all-reduce time vs size (".title.")"
set xlabel "tensor size (MiB of float32)"
set ylabel "time per all-reduce (ms)"
set logscale xy
set grid
set key top left
set datafile separator "\t"
set datafile missing "-1"
mib(n) = n * 4.0 / 1048576
pos(v) = (v > 0) ? v : NaN
plot data using (mib($1)):(pos($3)) with lines dashtype 2 lw 2 title "ina line-rate bound S(1+h)/B", \
     data using (mib($1)):(pos($2)) with linespoints pt 7 lw 2 title "ina (UDP, ina-switchd)", \
     data using (mib($1)):(pos($4)) with linespoints pt 5 lw 2 title "Gloo ring", \
     data using (mib($1)):(pos($5)) with linespoints pt 9 lw 2 title "OpenMPI MPI_Allreduce", \
     data using (mib($1)):(pos($6)) with linespoints pt 11 lw 2 title "ina (DPDK af_packet)"
