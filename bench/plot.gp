# Plots of dlm_bench results (scripts/bench.sh runs this):
#   gnuplot -e "dir='bench/results'" bench/plot.gp
# reads handoff.dat, scale_rows.dat, scale_depth.dat written by
# `dlm_bench --results_dir=DIR`, writes handoff.png and scale.png there.
if (!exists("dir")) dir = "bench/results"

set terminal pngcairo size 900,540 font "sans,10"
set grid
set key top left

# --- handoff: release -> next holder, by number of waiters -------------------
set output dir."/handoff.png"
sleep = system("sed -n 's/.*sleepBetweenRetries = \\([0-9]*\\) ms.*/\\1/p' ".dir."/handoff.dat")
set title "Handoff: from just before releaseLock to the next acquireLock returning\n(sleepBetweenRetries = ".sleep." ms; see latest.md for polling / wake-up)"
set xlabel "waiters blocked in acquireLock"
set ylabel "ms (log scale)"
set logscale x 2
set logscale y 10
set xtics (1, 2, 4, 8, 16, 32)
set xrange [0.8:20]
plot dir."/handoff.dat" using 1:2 with linespoints lw 2 pt 7 title "PostgreSQL p50", \
     ''                 using 1:3 with linespoints lw 2 pt 5 dt 2 title "PostgreSQL p99", \
     ''                 using 1:4 with linespoints lw 2 pt 7 title "SQLite p50", \
     ''                 using 1:5 with linespoints lw 2 pt 5 dt 2 title "SQLite p99"
unset logscale
unset xtics
set xtics
set autoscale x

# --- scale: cycle latency by table size and by hierarchy depth ---------------
set output dir."/scale.png"
set multiplot layout 1,2 title "Scale: acquire+release latency, 1 thread, PostgreSQL"
set title "by rows in the lock table (depth 1)"
set xlabel "rows (mostly FREE / expired)"
set ylabel "ms"
set logscale x 10
set yrange [0:*]
plot dir."/scale_rows.dat" using 1:2 with linespoints lw 2 pt 7 title "p50", \
     ''                    using 1:3 with linespoints lw 2 pt 5 dt 2 title "p99"
unset logscale x
set title "by hierarchy depth of the id"
set xlabel "depth (segments)"
set xrange [0:9]
set xtics (1, 4, 8)
# depth 1 points come from scale_rows.dat; scale_depth.dat has depth > 1.
first = real(system("awk '!/^#/ {print $1; exit}' ".dir."/scale_depth.dat"))
last = real(system("awk '!/^#/ {v=$1} END {print v}' ".dir."/scale_depth.dat"))
plot "< (awk '!/^#/ {print $1, 1, $2, $3}' ".dir."/scale_rows.dat; awk '!/^#/' ".dir."/scale_depth.dat) | sort -n -k1,1 -k2,2" \
       using ($1 == first ? $2 : 1/0):3 with linespoints lw 2 pt 7 title sprintf("p50, %.0f rows", first), \
     '' using ($1 == last ? $2 : 1/0):3 with linespoints lw 2 pt 5 title sprintf("p50, %.0f rows", last)
unset multiplot
