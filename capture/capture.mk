# capture.mk: the CUPTI capture library and its GPU test (included by the
# Makefile). Only these targets need the CUDA toolkit; `make` and
# `make test` build capture/convert.c (plain C) into the simulator library
# so the CPU tests can exercise it without CUDA.
#   make capture    build/libgpumemsim_capture.so (+ the gpumemsim launcher)
#   make gpu-test   build and run the GPU probe under capture, check the
#                   trace exactly (prints SKIP and succeeds without a GPU)
#   make capture-test  CUPTI-record unit tests (toolkit headers, no GPU)

NVCC          ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH     ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
CAPTURE_LIB   := $(BUILD)/libgpumemsim_capture.so
# The injection library, split by concern (capture/inject_int.h lists the files).
INJECT_SRCS   := capture/inject.c capture/inject_header.c capture/inject_activity.c \
		 capture/inject_links.c capture/inject_callbacks.c capture/inject_writer.c \
		 capture/inject_pause.c
CAPTURE_SRCS  := $(INJECT_SRCS) capture/convert.c traces/trace_writer.c \
		 traces/trace_names.c base/u64map.c base/strpool.c base/vec.c
CAPTURE_CFLAGS = $(CFLAGS) -std=c11 -D_GNU_SOURCE -Wall -Wextra -fPIC \
		 -fvisibility=hidden -I$(CUDA_HOME)/include
# libcuda from the stubs when the build machine has no driver: the soname
# (libcuda.so.1) binds to the real driver at run time.
CAPTURE_LIBS   = -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib64/stubs \
		 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcupti -lcuda -lz -ldl -lpthread
PROBE_BIN     := $(BUILD)/gpu_probe
PROBE_CHECK   := $(BUILD)/gpu_probe_check
PROBE_MODULES := $(BUILD)/gpu_probe_modules

# The converter and the launcher (capture/launcher.c: environment, fork,
# wait, report; `gpumemsim capture` parses its arguments in cli/) are plain
# C: part of the simulator library, so the binary and the tests link them.
$(LIBSIM): $(BUILD)/capture/convert.o $(BUILD)/capture/launcher.o
-include $(BUILD)/capture/convert.d $(BUILD)/capture/launcher.d

$(CAPTURE_LIB): $(CAPTURE_SRCS) capture/inject_int.h capture/convert.h capture/capture.mk \
		traces/trace.h
	@mkdir -p $(dir $@)
	$(CC) $(CAPTURE_CFLAGS) -shared -o $@ $(CAPTURE_SRCS) $(CAPTURE_LIBS) \
	  -Wl,--version-script=capture/exports.map

capture: $(BIN) $(CAPTURE_LIB)

$(PROBE_BIN): capture/tests/gpu_probe.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O2 $(CUDA_ARCH) -I$(CUDA_HOME)/include -o $@ $< -ldl

$(PROBE_MODULES): capture/tests/gpu_probe_modules.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O2 $(CUDA_ARCH) -I$(CUDA_HOME)/include -o $@ $< -L$(CUDA_HOME)/lib64/stubs -lcuda

$(PROBE_CHECK): capture/tests/gpu_probe_check.c $(LIBSIM)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LIBSIM) $(LDLIBS)

gpu-test: capture $(PROBE_BIN) $(PROBE_CHECK) $(PROBE_MODULES) cnn
	sh capture/tests/gpu_test.sh $(BUILD)

# CUPTI-record tests: hand-built CUpti_Activity* structs through the
# injection library's conversion and callbacks (linked from its sources, the
# functions it calls declared in capture/inject_int.h). Needs the toolkit's
# headers, no GPU: the driver stub answers the (never made) CUDA calls, so
# it runs on the build machines too.
CUPTI_TEST_BIN := $(BUILD)/test_capture_cupti
CUPTI_TEST_SRCS := tests/test_capture_cupti.c $(CAPTURE_SRCS)
$(CUPTI_TEST_BIN): $(CUPTI_TEST_SRCS) capture/inject_int.h capture/convert.h capture/capture.mk \
		   traces/trace.h
	@mkdir -p $(BUILD)/cuda-stubs
	ln -sf $(CUDA_HOME)/lib64/stubs/libcuda.so $(BUILD)/cuda-stubs/libcuda.so.1
	$(CC) $(CFLAGS) $(SAN) -std=c11 -D_GNU_SOURCE -Wall -Wextra -DGPUMEMSIM_CUPTI_TEST \
	  -I$(CUDA_HOME)/include -o $@ $(CUPTI_TEST_SRCS) -lcriterion \
	  $(CAPTURE_LIBS) -Wl,-rpath,$(abspath $(BUILD))/cuda-stubs $(LDLIBS)

capture-test: $(CUPTI_TEST_BIN)
	./$(CUPTI_TEST_BIN) --jobs 2
.PHONY: capture-test
