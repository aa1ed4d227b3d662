# Grouped bars, drawn by scripts/plot/plot.py (which lays them out and sets the variables):
# dir/bar<i>.tsv (x, value, width) per series, dir/seg<i>.tsv (x, y, dx, 0) per bound or ceiling
# (dashed segments over a group or some of its bars), dir/dots.tsv (x, value: each run),
# dir/labels.tsv (x, value, text over the bar), dir/xtics.tsv (x, group label); arrays series[],
# segnames[]; nseries, nsegs, ngroups, hasdots, logy, ytop, width, rot (degrees to turn the group
# labels), out, title, note, ylab.
set terminal pngcairo size width,620 noenhanced font ",10"
set output out
set title (strlen(note) > 0 ? title."\n".note : title)
set datafile separator "\t"
set style fill solid 0.8 border -1
set xrange [-0.6:ngroups - 0.4]
if (rot > 0) {
  set xtics scale 0 nomirror rotate by rot right
  set lmargin 24  # room for the first group's turned label
} else {
  set xtics scale 0 nomirror
}
set ylabel ylab
set grid ytics
set xlabel " "  # a line between the group labels and the key
set key below center horizontal maxrows 2
if (logy) {
  set logscale y
  set yrange [*:ytop * 3]
} else {
  set yrange [0:ytop * 1.15]
}
# (A gnuplot "plot for [i=1:0]" still runs once: plot.py writes every file, empty where unused.)
plot for [i=1:nseries] sprintf('%s/bar%d.tsv', dir, i) using 1:2:3 with boxes lc i title series[i], \
     for [i=1:nsegs] sprintf('%s/seg%d.tsv', dir, i) using 1:2:3:4 with vectors nohead \
       dt i+1 lw 2.5 lc rgb 'black' title segnames[i], \
     dir.'/dots.tsv' using 1:2 with points pt 7 ps 0.6 lc rgb 'black' title (hasdots ? 'each run' : ''), \
     dir.'/labels.tsv' using 1:2:3 with labels offset 0,0.7 font ",8" notitle, \
     dir.'/xtics.tsv' using 1:(NaN):xticlabels(2) notitle
