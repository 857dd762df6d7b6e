# jax_seed.gp: the figure of issue 8's JAX seed answer (scripts/jax_seed.sh
# runs it): reserved and device-level memory of the JAX ResNet batch sweep,
# real (solid, markers) against simulated (dashed), and the other policies
# on the same request stream. Variables from the caller: data (jax-seed.tsv),
# steps (batch, real pool, two label lines per step of the real pool), out
# (PNG), overhead_mib (constant added for simulated device-level), nfalls.
# Columns of data: 1 batch, 2 real pool, 3 real device, 4 real in use,
# 5 largest request, 6 sim bfc pool, 7 sim device, 8 pytorch,
# 9 pytorch expandable, 10 cuda_async, 11 cuda_malloc, 12 optimal (MiB).
set terminal pngcairo size 1400,1150 font 'Sans,13' linewidth 1.5 noenhanced
set output out
set datafile separator "\t"
set key autotitle columnhead

set logscale x 2
set xtics ("8" 8, "12" 12, "16" 16, "24" 24, "32" 32, "48" 48, "64" 64, "96" 96, \
	"128" 128, "192" 192, "256" 256)
set xrange [7:300]
set logscale y 2
set grid xtics ytics lc rgb '#dddddd'
set key top left box opaque font ',12' spacing 1.1

stats data using 1 nooutput
xmax = STATS_max

# a value below the previous one (a fall) or NaN; prev is reset per series
fall(v) = (r = (v < prev) ? v : NaN, prev = v, r)

set multiplot layout 2,1 title "JAX ResNet (flax, 32x32, 3 SGD steps, H200): peak memory against batch size, real vs simulated\n" . \
	(nfalls == 0 ? "memory never falls as batch grows: a staircase of BFC region doublings" : \
	 sprintf("%d fall(s), circled", nfalls)) font ',15'

# --- top: the allocator's reserved memory
set title "Reserved memory (allocator pool): real BFC, simulated BFC and the other policies on the same requests"
set ylabel "peak reserved (MiB, log scale)"
set ytics ("64" 64, "128" 128, "256" 256, "512" 512, "1024" 1024, "2048" 2048, "4096" 4096)
set yrange [64:6000]
set format x ""
set xlabel ""
set tmargin 5
set bmargin 1
set label 1 "simulated BFC above real: each captured request arrives rounded up to 2 MiB\n(XLA's platform allocator maps 2 MiB granules), so 7-8 regions grow instead of 5" \
	at graph 0.99, graph 0.08 right font ',11' tc rgb '#c0392b'
set label 2 "pytorch (both settings), cuda_async, cuda_malloc: smooth, no step, within 7% of the floor" \
	at graph 0.99, graph 0.19 right font ',11' tc rgb '#2471a3'
set style textbox opaque noborder margins 1,1
plot data using 1:2 title 'real bfc pool (memory_stats peak_pool_bytes)' w lp lw 3 pt 7 ps 1.4 lc rgb '#c0392b', \
     data using 1:6 title 'simulated bfc (allow_growth, bytes_limit)' w lp lw 3 dt 2 pt 6 ps 1.4 lc rgb '#c0392b', \
     data using 1:8 title 'simulated pytorch (default)' w lp lw 2 dt 3 pt 4 ps 1 lc rgb '#2471a3', \
     data using 1:9 title 'simulated pytorch expandable_segments:True' w lp lw 2 dt 4 pt 8 ps 1 lc rgb '#17a589', \
     data using 1:10 title 'simulated cuda_async' w lp lw 2 dt 5 pt 10 ps 1 lc rgb '#7d3c98', \
     data using 1:11 title 'simulated cuda_malloc' w lp lw 2 dt 2 pt 12 ps 1 lc rgb '#b9770e', \
     data using 1:12 title 'optimal (floor: peak of live requests)' w l lw 2 dt 1 lc rgb '#555555', \
     steps using ($1 < xmax ? $1 : NaN):2:3 notitle w labels boxed left offset 1,-0.9 font ',11' tc rgb '#c0392b', \
     steps using ($1 < xmax ? $1 : NaN):2:4 notitle w labels boxed left offset 1,-1.9 font ',11' tc rgb '#c0392b', \
     steps using ($1 < xmax ? NaN : $1):2:3 notitle w labels boxed right offset -1.5,1.9 font ',11' tc rgb '#c0392b', \
     steps using ($1 < xmax ? NaN : $1):2:4 notitle w labels boxed right offset -1.5,0.9 font ',11' tc rgb '#c0392b', \
     prev = -1e300, data using 1:(fall($2)) title (nfalls ? 'fall' : '') w p pt 6 ps 4 lw 2 lc rgb 'black', \
     prev = -1e300, data using 1:(fall($6)) notitle w p pt 6 ps 4 lw 2 lc rgb 'black', \
     prev = -1e300, data using 1:(fall($8)) notitle w p pt 6 ps 4 lw 2 lc rgb 'black', \
     prev = -1e300, data using 1:(fall($9)) notitle w p pt 6 ps 4 lw 2 lc rgb 'black', \
     prev = -1e300, data using 1:(fall($10)) notitle w p pt 6 ps 4 lw 2 lc rgb 'black', \
     prev = -1e300, data using 1:(fall($11)) notitle w p pt 6 ps 4 lw 2 lc rgb 'black'
unset label 1
unset label 2

# --- bottom: what the device sees
set title sprintf("Device-level memory: real = NVML process memory; simulated = simulated BFC pool + %.0f MiB\n(CUDA context, modules, library handles: the median of real NVML - real pool over the runs)", overhead_mib)
set ylabel "device memory (MiB, log scale)"
set ytics ("512" 512, "768" 768, "1024" 1024, "1536" 1536, "2048" 2048, "3072" 3072, "4096" 4096)
set yrange [600:4096]
set format x "%g"
set xlabel "batch size (log2 scale)"
set tmargin 4.5
set bmargin 4
plot data using 1:3 title 'real device-level (NVML)' w lp lw 3 pt 7 ps 1.4 lc rgb '#1e8449', \
     data using 1:7 title 'simulated device-level (bfc)' w lp lw 3 dt 2 pt 6 ps 1.4 lc rgb '#1e8449', \
     prev = -1e300, data using 1:(fall($3)) title (nfalls ? 'fall' : '') w p pt 6 ps 4 lw 2 lc rgb 'black', \
     prev = -1e300, data using 1:(fall($7)) notitle w p pt 6 ps 4 lw 2 lc rgb 'black'
unset multiplot
