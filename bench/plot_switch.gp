# ns per switch by back-end: a horizontal bar chart on a log axis.
#
#   gnuplot -e "dir='docs/perf'" bench/plot_switch.gp
#
# Reads dir/switch.dat (written by bench/plots.sh: label, median, fastest,
# slowest, group), writes dir/switch.svg.
if (!exists("dir")) dir = "docs/perf"

set terminal svg size 900,420 dynamic noenhanced font "sans,12" background rgb "white"
set output dir."/switch.svg"

set title "Nanoseconds per context switch, by back-end\n(median of 9 interleaved rounds in one run; whiskers: fastest and slowest round)"
set logscale x 10
set xrange [1:1000]
set xlabel "ns per switch (log scale)"
set format x "%g"
set xtics nomirror
set grid xtics mxtics lc rgb "#dddddd"
set yrange [6.6:-0.6]
set ytics nomirror scale 0
set border 3
set key top right box opaque samplen 1.5 spacing 1.2
set style fill solid 0.85 border -1
set lmargin 38
set rmargin 4

# Colours by group: 1 ours (asm), 2 baseline, 3 ours (ucontext).
ours_asm = 0x2166ac
baseline = 0x999999
ours_ucontext = 0xd6604d
colour(g) = g == 1 ? ours_asm : (g == 2 ? baseline : ours_ucontext)
h = 0.35

plot dir."/switch.dat" using (1):0:(1):2:($0-h):($0+h):(colour($5)):ytic(1) \
         with boxxyerror lc rgb variable notitle, \
     "" using 2:0:3:4 with xerrorbars pt -1 lc rgb "black" notitle, \
     "" using 4:0:(sprintf("  %.1f", $2)) with labels left notitle, \
     NaN with boxes lc rgb ours_asm title "ours, assembly back-end", \
     NaN with boxes lc rgb ours_ucontext title "ours, ucontext back-end", \
     NaN with boxes lc rgb baseline title "baseline"
