# Resident memory against the number of live coroutines (dense 16 KiB
# stacks), beside blocked threads with 16 KiB stacks.
#
#   gnuplot -e "dir='docs/perf'" bench/plot_live.gp
#
# Reads dir/live.dat (N, total MiB, growth MiB, KiB per coroutine) and
# dir/live_threads.dat (N, growth MiB, KiB per thread, kernel stacks MiB,
# kernel stack KiB per thread), both written by bench/plots.sh; writes
# dir/live.svg.
if (!exists("dir")) dir = "docs/perf"

set terminal svg size 1000,440 dynamic noenhanced font "sans,12" background rgb "white"
set output dir."/live.svg"

coro = 0x2166ac
thread = 0x777777
target = 0xd6604d
target_kib = 4.5

set multiplot layout 1,2 title "Live coroutines suspended at once, dense 16 KiB stacks: resident memory (VmRSS growth)"

set logscale x 10
set xrange [800:1.25e6]
set format x "%.0s%c"
set xlabel "live coroutines or blocked threads (log scale)"
set grid xtics ytics lc rgb "#dddddd"
set border 3
set xtics nomirror
set ytics nomirror

# Left: KiB per coroutine.
set title "KiB resident per coroutine (per thread)"
set yrange [0:40]
set ylabel "KiB each"
set key top right box opaque samplen 2 font ",10"
plot dir."/live.dat" using 1:4 with linespoints pt 7 ps 0.8 lw 2 lc rgb coro title "coroutine (bench/live)", \
     dir."/live_threads.dat" using 1:3 with linespoints pt 5 ps 0.8 lw 2 lc rgb thread title "blocked pthread, in the process", \
     dir."/live_threads.dat" using 1:($3+$5) with linespoints pt 4 ps 0.8 lw 2 dt 2 lc rgb thread title "pthread + its kernel stack", \
     target_kib with lines lw 1.5 dt 3 lc rgb target title "target: 4.5 KiB", \
     16 with lines lw 1 dt 4 lc rgb "#aaaaaa" title "stack size (reserved, not resident)"

# Right: total MiB.
set title "Total resident growth, MiB"
set logscale y 10
set yrange [1:10000]
set format y "%g"
set ylabel "MiB (log scale)"
set key top left box opaque samplen 2 font ",10"
plot dir."/live.dat" using 1:3 with linespoints pt 7 ps 0.8 lw 2 lc rgb coro title "coroutines", \
     dir."/live_threads.dat" using 1:2 with linespoints pt 5 ps 0.8 lw 2 lc rgb thread title "blocked pthreads, in the process", \
     dir."/live_threads.dat" using 1:($2+$4) with linespoints pt 4 ps 0.8 lw 2 dt 2 lc rgb thread title "pthreads + kernel stacks", \
     target_kib * x / 1024 with lines lw 1.5 dt 3 lc rgb target title "target: 4.5 KiB each"

unset multiplot
