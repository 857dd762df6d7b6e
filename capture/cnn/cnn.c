/*
 * cnn.c: main program of the CUDA C CNN training workload (build/cnn).
 *
 * Trains a VGG- or ResNet-style network with cuDNN and cuBLAS on a synthetic
 * task with a learnable signal (each class has its own sinusoidal pattern per
 * channel, plus noise), generated on the host from --seed. It exists to be
 * captured: every tensor is its own cudaMalloc/cudaFree (see layers.c; with
 * --alloc async its own cudaMallocAsync/cudaFreeAsync from a caching pool), NVTX
 * ranges name each step, phase and layer, and the log says which cuDNN
 * algorithm and workspace each convolution got (they change with the batch
 * size, one of the effects the simulator studies).
 */
#include <getopt.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <nvtx3/nvToolsExt.h>
#include "cnn.h"
#include "kernels.h"

struct cnn_opts {
	const char *model;
	int batch, image, steps, classes, print_every;
	long ws_mib;
	enum cnn_algo_mode mode;
	const char *algo;
	enum cnn_alloc_mode alloc;
	const char *alloc_name;
	uint64_t seed;
	double lr;
};

static void cnn_usage(FILE *f)
{
	fputs("usage: cnn [--model vgg|vgg16|resnet|resnet34] [--batch N] [--image N]\n"
	      "           [--steps N] [--classes N] [--workspace-limit MiB]\n"
	      "           [--algo fastest|heuristic|min-workspace] [--seed N]\n"
	      "           [--print-every N] [--lr X] [--alloc malloc|async]\n"
	      "Trains a CNN on synthetic data with one cudaMalloc/cudaFree per tensor\n"
	      "(--alloc async: cudaMallocAsync/cudaFreeAsync from the default pool,\n"
	      "which keeps freed memory cached).\n"
	      "Defaults: --model resnet --batch 32 --image 64 --steps 20 --classes 10\n"
	      "          --workspace-limit 1024 --algo fastest --seed 1 --print-every 5\n"
	      "          --lr 0.02 (resnet) or 0.01 (vgg) --alloc malloc\n",
	      f);
}

/* Strict integer option: the whole string, within [lo, hi]. */
static long cnn_opt_long(const char *name, const char *s, long lo, long hi)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < lo || v > hi) {
		fprintf(stderr, "cnn: --%s %s: expected an integer in %ld..%ld\n",
			name, s, lo, hi);
		exit(2);
	}
	return v;
}

static void cnn_parse(int argc, char **argv, struct cnn_opts *o)
{
	static const struct option lo[] = {
		{ "model", required_argument, 0, 'm' },
		{ "batch", required_argument, 0, 'b' },
		{ "image", required_argument, 0, 'i' },
		{ "steps", required_argument, 0, 's' },
		{ "classes", required_argument, 0, 'c' },
		{ "workspace-limit", required_argument, 0, 'w' },
		{ "algo", required_argument, 0, 'a' },
		{ "seed", required_argument, 0, 'S' },
		{ "print-every", required_argument, 0, 'p' },
		{ "lr", required_argument, 0, 'l' },
		{ "alloc", required_argument, 0, 'A' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 }
	};
	*o = (struct cnn_opts){ .model = "resnet", .batch = 32, .image = 64,
		.steps = 20, .classes = 10, .print_every = 5, .ws_mib = 1024,
		.mode = CNN_ALGO_FASTEST, .algo = "fastest", .seed = 1, .lr = 0,
		.alloc = CNN_ALLOC_MALLOC, .alloc_name = "malloc" };
	int c;
	char *end;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'm': o->model = optarg; break;
		case 'b': o->batch = (int)cnn_opt_long("batch", optarg, 1, 65536); break;
		case 'i': o->image = (int)cnn_opt_long("image", optarg, 16, 1024); break;
		case 's': o->steps = (int)cnn_opt_long("steps", optarg, 1, 10000000); break;
		case 'c': o->classes = (int)cnn_opt_long("classes", optarg, 2, 100000); break;
		case 'w': o->ws_mib = cnn_opt_long("workspace-limit", optarg, 0, 1L << 30); break;
		case 'S': o->seed = (uint64_t)cnn_opt_long("seed", optarg, 0, 1L << 62); break;
		case 'p': o->print_every = (int)cnn_opt_long("print-every", optarg, 1, 10000000); break;
		case 'l':
			o->lr = strtod(optarg, &end);
			if (!*optarg || *end || !(o->lr > 0 && o->lr < 10)) {
				fprintf(stderr, "cnn: --lr %s: expected a number in (0, 10)\n", optarg);
				exit(2);
			}
			break;
		case 'a':
			o->algo = optarg;
			if (!strcmp(optarg, "fastest"))
				o->mode = CNN_ALGO_FASTEST;
			else if (!strcmp(optarg, "heuristic"))
				o->mode = CNN_ALGO_HEURISTIC;
			else if (!strcmp(optarg, "min-workspace"))
				o->mode = CNN_ALGO_MINWS;
			else {
				fprintf(stderr, "cnn: --algo %s: expected fastest, heuristic or min-workspace\n", optarg);
				exit(2);
			}
			break;
		case 'A':
			o->alloc_name = optarg;
			if (!strcmp(optarg, "malloc"))
				o->alloc = CNN_ALLOC_MALLOC;
			else if (!strcmp(optarg, "async"))
				o->alloc = CNN_ALLOC_ASYNC;
			else {
				fprintf(stderr, "cnn: --alloc %s: expected malloc or async\n", optarg);
				exit(2);
			}
			break;
		case 'h': cnn_usage(stdout); exit(0);
		default: cnn_usage(stderr); exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cnn: unexpected argument '%s'\n", argv[optind]);
		cnn_usage(stderr);
		exit(2);
	}
}

/* conv-bn-relu, the unit of both families. */
static int cnn_cbr(struct cnn_net *nt, const char *conv, const char *bn,
		   const char *relu, int x, int cout, int k, int stride, int pad)
{
	x = cnn_conv(nt, conv, x, cout, k, stride, pad);
	x = cnn_bn(nt, bn, x);
	return relu ? cnn_relu(nt, relu, x) : x;
}

/* VGG with batch norm: CFG lists conv widths, 0 for a 2x2 max pool. */
static int cnn_build_vgg(struct cnn_net *nt, const int *cfg, int ncfg, int classes)
{
	char a[64], b[64], c[64];
	int x = 0, stage = 1, idx = 1;
	for (int i = 0; i < ncfg; i++) {
		if (cfg[i] == 0) {
			snprintf(a, sizeof(a), "pool%d", stage);
			x = cnn_maxpool(nt, a, x, 2, 2, 0);
			stage++;
			idx = 1;
			continue;
		}
		snprintf(a, sizeof(a), "conv%d_%d", stage, idx);
		snprintf(b, sizeof(b), "bn%d_%d", stage, idx);
		snprintf(c, sizeof(c), "relu%d_%d", stage, idx);
		x = cnn_cbr(nt, a, b, c, x, cfg[i], 3, 1, 1);
		idx++;
	}
	/* Batch norm after the hidden FC layers: without it the wide first
	 * FC layer (512*7*7 inputs at 224) diverges at these learning rates. */
	x = cnn_fc(nt, "fc1", x, 512);
	x = cnn_bn(nt, "bn_fc1", x);
	x = cnn_relu(nt, "relu_fc1", x);
	x = cnn_fc(nt, "fc2", x, 512);
	x = cnn_bn(nt, "bn_fc2", x);
	x = cnn_relu(nt, "relu_fc2", x);
	return cnn_fc(nt, "fc3", x, classes);
}

/* ResNet with basic blocks (two 3x3 convolutions), projection shortcuts
 * where the shape changes, identity elsewhere. */
static int cnn_build_resnet(struct cnn_net *nt, const int *blocks, int classes)
{
	char p[64], a[80], b[80], c[80];
	int x = cnn_cbr(nt, "conv1", "bn1", "relu", 0, 64, 7, 2, 3);
	x = cnn_maxpool(nt, "maxpool", x, 3, 2, 1);
	int cin = 64;
	for (int s = 0; s < 4; s++) {
		int width = 64 << s;
		for (int bi = 0; bi < blocks[s]; bi++) {
			int stride = (s > 0 && bi == 0) ? 2 : 1;
			snprintf(p, sizeof(p), "layer%d.%d", s + 1, bi);
			snprintf(a, sizeof(a), "%s.conv1", p);
			snprintf(b, sizeof(b), "%s.bn1", p);
			snprintf(c, sizeof(c), "%s.relu1", p);
			int y = cnn_cbr(nt, a, b, c, x, width, 3, stride, 1);
			snprintf(a, sizeof(a), "%s.conv2", p);
			snprintf(b, sizeof(b), "%s.bn2", p);
			y = cnn_cbr(nt, a, b, NULL, y, width, 3, 1, 1);
			int sc = x;
			if (stride != 1 || cin != width) {
				snprintf(a, sizeof(a), "%s.downsample.0", p);
				snprintf(b, sizeof(b), "%s.downsample.1", p);
				sc = cnn_cbr(nt, a, b, NULL, x, width, 1, stride, 0);
			}
			snprintf(a, sizeof(a), "%s.add", p);
			y = cnn_add(nt, a, y, sc);
			snprintf(c, sizeof(c), "%s.relu2", p);
			x = cnn_relu(nt, c, y);
			cin = width;
		}
	}
	x = cnn_gap(nt, "avgpool", x);
	return cnn_fc(nt, "fc", x, classes);
}

/* Per class and channel, a plane wave sin(2pi(fx x/W + fy y/H) + phase),
 * kept as row and column sine/cosine tables (sin(a+b) expands), so a batch
 * costs a few multiplies per pixel. */
struct cnn_data {
	int classes, img;
	float *sx, *cx, *sy, *cy;	/* [classes*3][img] */
	uint64_t rng;
};

static void cnn_data_init(struct cnn_data *d, int classes, int img, uint64_t seed)
{
	size_t n = (size_t)classes * 3 * img;
	d->classes = classes;
	d->img = img;
	d->rng = seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
	d->sx = malloc(n * sizeof(float));
	d->cx = malloc(n * sizeof(float));
	d->sy = malloc(n * sizeof(float));
	d->cy = malloc(n * sizeof(float));
	if (!d->sx || !d->cx || !d->sy || !d->cy)
		cnn_fail("out of host memory");
	for (int p = 0; p < classes * 3; p++) {
		int fx = 1 + (int)(cnn_rand(&d->rng) % 4);
		int fy = 1 + (int)(cnn_rand(&d->rng) % 4);
		double ph = (cnn_rand(&d->rng) >> 11) / 9007199254740992.0 * 6.283185307179586;
		for (int i = 0; i < img; i++) {
			double ax = 6.283185307179586 * fx * i / img + ph;
			double ay = 6.283185307179586 * fy * i / img;
			d->sx[(size_t)p * img + i] = (float)sin(ax);
			d->cx[(size_t)p * img + i] = (float)cos(ax);
			d->sy[(size_t)p * img + i] = (float)sin(ay);
			d->cy[(size_t)p * img + i] = (float)cos(ay);
		}
	}
}

/* One batch: pattern of the label plus uniform noise of unit variance. */
static void cnn_data_batch(struct cnn_data *d, int n, float *x, int *labels)
{
	int img = d->img;
	for (int s = 0; s < n; s++) {
		int y = (int)(cnn_rand(&d->rng) % (uint64_t)d->classes);
		labels[s] = y;
		for (int ch = 0; ch < 3; ch++) {
			size_t p = ((size_t)y * 3 + ch) * img;
			float *o = x + ((size_t)s * 3 + ch) * img * img;
			for (int r = 0; r < img; r++) {
				float syr = d->sy[p + r], cyr = d->cy[p + r];
				for (int c = 0; c < img; c++) {
					float u = (float)((cnn_rand(&d->rng) >> 40) * (1.0 / 16777216.0)) - 0.5f;
					o[(size_t)r * img + c] = d->sx[p + c] * cyr +
						d->cx[p + c] * syr + 3.4641016f * u;
				}
			}
		}
	}
}

static void cnn_data_free(struct cnn_data *d)
{
	free(d->sx);
	free(d->cx);
	free(d->sy);
	free(d->cy);
}

static double cnn_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Loss of the logits (last value) against LABELS; leaves the logits'
 * gradient in place and frees the logits. Returns the mean loss. */
static double cnn_loss(struct cnn_net *nt, const int *d_labels, float *h_loss)
{
	int last = nt->nvals - 1;
	struct cnn_value *z = &nt->vals[last];
	int n = z->n, classes = z->c;
	nvtxRangePushA("loss");
	float *d_loss = cnn_alloc((size_t)n * sizeof(float));
	z->grad = cnn_alloc(z->count * sizeof(float));
	CUDA_CHECK(cnn_k_softmax_xent(z->act, d_labels, n, classes, 1.0f / n,
				      d_loss, z->grad));
	cnn_release_value(nt, last);
	CUDA_CHECK(cudaMemcpy(h_loss, d_loss, (size_t)n * sizeof(float),
			      cudaMemcpyDeviceToHost));
	cnn_free(d_loss, (size_t)n * sizeof(float));
	nvtxRangePop();
	double s = 0;
	for (int i = 0; i < n; i++)
		s += h_loss[i];
	return s / n;
}

/* Parse, build, train, report. Exit 0 on success, 1 on a device or shape
 * problem, 2 on bad options. */
int main(int argc, char **argv)
{
	struct cnn_opts o;
	struct cnn_net nt;
	struct cnn_data data;
	static const int vgg11[] = { 64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0 };
	static const int vgg16[] = { 64, 64, 0, 128, 128, 0, 256, 256, 256, 0,
				     512, 512, 512, 0, 512, 512, 512, 0 };
	static const int r18[] = { 2, 2, 2, 2 }, r34[] = { 3, 4, 6, 3 };

	cnn_parse(argc, argv, &o);
	int is_vgg = !strcmp(o.model, "vgg") || !strcmp(o.model, "vgg11");
	int is_vgg16 = !strcmp(o.model, "vgg16");
	int is_r18 = !strcmp(o.model, "resnet") || !strcmp(o.model, "resnet18");
	int is_r34 = !strcmp(o.model, "resnet34");
	if (!is_vgg && !is_vgg16 && !is_r18 && !is_r34) {
		fprintf(stderr, "cnn: --model %s: expected vgg, vgg16, resnet or resnet34\n", o.model);
		return 2;
	}
	if ((is_vgg || is_vgg16) && o.batch < 2) {
		fprintf(stderr, "cnn: --batch 1: the VGG classifier's batch norm needs at least 2\n");
		return 2;
	}
	if (o.lr <= 0)
		o.lr = (is_vgg || is_vgg16) ? 0.01 : 0.02;
	printf("cnn: model=%s batch=%d image=%d algo=%s steps=%d classes=%d workspace_limit_mib=%ld seed=%llu lr=%g alloc=%s\n",
	       o.model, o.batch, o.image, o.algo, o.steps, o.classes, o.ws_mib,
	       (unsigned long long)o.seed, o.lr, o.alloc_name);

	struct cudaDeviceProp prop;
	CUDA_CHECK(cudaSetDevice(0));
	CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
	printf("cnn: device %s, cuDNN %zu, CUDA runtime %d\n", prop.name,
	       cudnnGetVersion(), CUDART_VERSION);
	cnn_mem_init(o.alloc);

	nvtxRangePushA("build");
	cnn_net_init(&nt, o.batch, 3, o.image, o.image);
	nt.rng = o.seed * 0xD1B54A32D192ED03ULL + 1;
	nt.mode = o.mode;
	nt.ws_limit = (size_t)o.ws_mib << 20;
	nt.lr = (float)o.lr;
	nt.momentum = 0.9f;
	nt.wd = 1e-4f;
	if (is_vgg || is_vgg16)
		cnn_build_vgg(&nt, is_vgg ? vgg11 : vgg16,
			      is_vgg ? (int)(sizeof(vgg11) / sizeof(vgg11[0]))
				     : (int)(sizeof(vgg16) / sizeof(vgg16[0])),
			      o.classes);
	else
		cnn_build_resnet(&nt, is_r18 ? r18 : r34, o.classes);
	cnn_net_finish(&nt);
	nvtxRangePop();

	cnn_data_init(&data, o.classes, o.image, o.seed);
	size_t xcount = (size_t)o.batch * 3 * o.image * o.image;
	float *hx = malloc(xcount * sizeof(float));
	int *hy = malloc((size_t)o.batch * sizeof(int));
	float *hloss = malloc((size_t)o.batch * sizeof(float));
	if (!hx || !hy || !hloss)
		cnn_fail("out of host memory");

	double first_ms = 0, rest_ms = 0, first_loss = 0, last_loss = 0, window = 0;
	int nwin = 0;
	char label[32];
	for (int step = 0; step < o.steps; step++) {
		cnn_data_batch(&data, o.batch, hx, hy);
		CUDA_CHECK(cudaDeviceSynchronize());
		double t0 = cnn_now();
		snprintf(label, sizeof(label), "step %d", step);
		nvtxRangePushA(label);

		nvtxRangePushA("forward");
		nt.vals[0].act = cnn_alloc(xcount * sizeof(float));
		CUDA_CHECK(cudaMemcpy(nt.vals[0].act, hx, xcount * sizeof(float),
				      cudaMemcpyHostToDevice));
		int *d_labels = cnn_alloc((size_t)o.batch * sizeof(int));
		CUDA_CHECK(cudaMemcpy(d_labels, hy, (size_t)o.batch * sizeof(int),
				      cudaMemcpyHostToDevice));
		cnn_forward(&nt);
		double loss = cnn_loss(&nt, d_labels, hloss);
		cnn_free(d_labels, (size_t)o.batch * sizeof(int));
		nvtxRangePop();

		nvtxRangePushA("backward");
		cnn_backward(&nt);
		nvtxRangePop();

		nvtxRangePushA("optimizer");
		cnn_optimizer(&nt);
		nvtxRangePop();

		CUDA_CHECK(cudaDeviceSynchronize());
		nvtxRangePop();
		double ms = (cnn_now() - t0) * 1e3;
		if (step == 0) {
			first_ms = ms;
			first_loss = loss;
		} else {
			rest_ms += ms;
		}
		if (!isfinite(loss))
			cnn_fail("step %d: loss is %g (diverged; try a smaller --lr)", step, loss);
		last_loss = loss;
		window += loss;
		nwin++;
		if ((step + 1) % o.print_every == 0 || step + 1 == o.steps) {
			printf("cnn: step %d loss %.4f mean_last_%d %.4f step_ms %.2f live_mib %.1f\n",
			       step, loss, nwin, window / nwin, ms,
			       cnn_mem.live / 1048576.0);
			fflush(stdout);
			window = 0;
			nwin = 0;
		}
	}

	cnn_print_algos(&nt, stdout);
	printf("cnn: peak_live_bytes %llu (%.1f MiB) device_allocs %llu device_frees %llu\n",
	       (unsigned long long)cnn_mem.peak, cnn_mem.peak / 1048576.0,
	       (unsigned long long)cnn_mem.nalloc, (unsigned long long)cnn_mem.nfree);
	printf("cnn: first_step_ms %.2f mean_step_ms %.2f (steps 1..%d) loss %.4f -> %.4f (ln classes %.4f)\n",
	       first_ms, o.steps > 1 ? rest_ms / (o.steps - 1) : first_ms,
	       o.steps - 1, first_loss, last_loss, log((double)o.classes));
	cnn_net_destroy(&nt);
	cnn_data_free(&data);
	free(hx);
	free(hy);
	free(hloss);
	printf("cnn: end model=%s batch=%d image=%d algo=%s live_after_free %llu\n",
	       o.model, o.batch, o.image, o.algo, (unsigned long long)cnn_mem.live);
	return 0;
}
