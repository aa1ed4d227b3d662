# scripts/testbed.sh's figure, drawn by scripts/plot/plot.py from results.jsonl: all-reduce time
# against tensor size for ina, its line-rate bound, Gloo's ring, MPI_Allreduce and ina over DPDK.
# dir/testbed.tsv columns: MiB, ina_ms, bound_ms, gloo_ms, mpi_ms, ina_dpdk_ms (NaN: not run);
# hasgloo, hasmpi, hasdpdk: 0 keeps a system that did not run out of the key.
set terminal pngcairo size 900,600 noenhanced
set output out
set title (strlen(note) > 0 ? title."\n".note : title)
set xlabel "tensor size (MiB of float32)"
set ylabel "time per all-reduce (ms)"
set logscale xy 2  # powers of 2: labelled tics within a decade too
set grid
set key top left
set autoscale fix
set offsets graph 0.08, graph 0.08, graph 0.1, graph 0.1  # no point on the frame
set datafile separator "\t"
data = dir.'/testbed.tsv'
plot data using 1:3 with lines dashtype 2 lw 2 title "ina line-rate bound S(1+h)/B", \
     data using 1:2 with linespoints pt 7 lw 2 title "ina (UDP, ina-switchd)", \
     data using 1:4 with linespoints pt 5 lw 2 title (hasgloo ? "Gloo ring" : ""), \
     data using 1:5 with linespoints pt 9 lw 2 title (hasmpi ? "OpenMPI MPI_Allreduce" : ""), \
     data using 1:6 with linespoints pt 11 lw 2 title (hasdpdk ? "ina (DPDK af_packet)" : "")
