# capture/cnn/cnn.mk: `make cnn` builds build/cnn, the CUDA C CNN training
# workload (cuDNN + cuBLAS + our kernels). Included from the top-level
# Makefile; not part of `all`, and skipped with a message when nvcc or the
# cuDNN headers are missing, so machines without CUDA build and test as usual.

CNN_NVCC     ?= $(CUDA_HOME)/bin/nvcc
CNN_ARCH     ?= -gencode arch=compute_80,code=sm_80 \
		-gencode arch=compute_90,code=sm_90 \
		-gencode arch=compute_90,code=compute_90
CNN_CUDNN_H  := $(firstword $(wildcard $(CUDA_HOME)/include/cudnn.h \
		 /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h))
CNN_CUDNN_INC := $(if $(CNN_CUDNN_H),-I$(dir $(CNN_CUDNN_H)))
CNN_BIN      := $(BUILD)/cnn
CNN_OBJS     := $(BUILD)/capture/cnn/cnn.o $(BUILD)/capture/cnn/layers.o \
		$(BUILD)/capture/cnn/kernels.o
CNN_LIBDIRS  := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 \
		-L/usr/lib/x86_64-linux-gnu
CNN_LDLIBS   := -lcudnn -lcublas -lcudart -ldl -lstdc++ -lm -lpthread

.PHONY: cnn

ifneq ($(and $(wildcard $(CNN_NVCC)),$(CNN_CUDNN_H)),)
cnn: $(CNN_BIN)

$(BUILD)/capture/cnn/cnn.o $(BUILD)/capture/cnn/layers.o: \
	ALL_CFLAGS += -I$(CUDA_HOME)/include $(CNN_CUDNN_INC)

$(BUILD)/capture/cnn/kernels.o: capture/cnn/kernels.cu capture/cnn/kernels.h
	@mkdir -p $(dir $@)
	$(CNN_NVCC) -O2 $(CNN_ARCH) -Xcompiler -Wall,-Wextra -c $< -o $@

$(CNN_BIN): $(CNN_OBJS)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(CNN_LIBDIRS) $(CNN_LDLIBS)

-include $(BUILD)/capture/cnn/cnn.d $(BUILD)/capture/cnn/layers.d
else
cnn:
	@echo "make cnn: skipped: needs nvcc ($(CNN_NVCC)) and cudnn.h (set CUDA_HOME)"
endif
