/*
 * resident_probe.cu -- can a kernel that stays resident and polls mapped memory answer a small reduction
 * faster than a launch can (issue 26: a small gr.sum from Lua in <= 5 us)?
 *
 * Wall time per round trip from this host thread, float32 sums of n elements held in L2, two ways:
 *   graph:    the engine's path today -- a captured single-pass kernel (grid-stride sum, partials, the
 *             last block's finish) replayed from a CUDA graph, the host spinning on a flag it raises;
 *   resident: K blocks launched once; block 0 polls a request word in pinned host memory and hands the
 *             request to the others through device memory; each block takes the virtual blocks of the
 *             same single-pass shape, and the last to take its ticket writes the value and a done word
 *             to pinned memory, which the host spins on.
 * Also the cost of cudaStreamQuery on an idle stream (the resident path's test that the stream's earlier
 * work is done). Build: nvcc -O3 -arch=sm_90 -o build/resident_probe experiments/tuning/resident_probe.cu
 */
#include "timing.cuh"

#include <atomic>
#include <chrono>
#include <cstring>

namespace {

constexpr int kBlock = 256;
constexpr unsigned kExit = 0xffffffffu;

struct alignas(64) Request {     /* written by the host */
    volatile unsigned seq;
    const float *in;
    unsigned long long n;
    unsigned grid;               /* virtual blocks: the single-pass kernel's grid for n */
};
struct alignas(64) Reply {       /* written by the device */
    volatile unsigned long long word;   /* the request's seq << 32 | the value's bits: one store, no fence */
    volatile unsigned exited;
};
struct Command {                 /* device memory: block 0 to the others */
    volatile unsigned seq;
    const float *in;
    unsigned long long n;
    unsigned grid;
};

__device__ float block_sum(float v) {
    __shared__ float w[32];
    for (int d = 16; d; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? w[threadIdx.x] : 0.f;
        for (int d = 16; d; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    }
    return v;
}

/* one virtual block b of g: the grid-stride share of thread (b, threadIdx.x), loads through L2 (__ldcg) since a
 * resident kernel's L1 may hold lines from before the host wrote new data */
__device__ float share(const float *in, unsigned long long n, unsigned b, unsigned g) {
    const unsigned long long tid = (unsigned long long)b * blockDim.x + threadIdx.x, step = (unsigned long long)g * blockDim.x;
    float a = 0.f, c = 0.f;
    unsigned long long i = tid;
    for (; i + step < n; i += 2 * step) { a += __ldcg(in + i); c += __ldcg(in + i + step); }
    if (i < n) a += __ldcg(in + i);
    return a + c;
}

template <bool kPacked>
__global__ void single_pass(const float *in, unsigned long long n, float *partials, unsigned *ticket, float *out,
                            volatile unsigned long long *flag) {
    float v = block_sum(share(in, n, blockIdx.x, gridDim.x));
    __shared__ bool last;
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = v;
        __threadfence();
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    float s = 0.f;
    for (unsigned i = threadIdx.x; i < gridDim.x; i += blockDim.x) s += ((volatile float *)partials)[i];
    s = block_sum(s);
    if (threadIdx.x == 0) {
        *ticket = 0;
        if (kPacked) {
            *flag = 1ull << 32 | __float_as_uint(s);
        } else {
            *out = s;
            __threadfence_system();
            *flag = 1u;
        }
    }
}

__device__ unsigned load_acquire_sys(const volatile unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void resident(Request *req, Reply *rep, Command *cmd, float *partials, unsigned *ticket, long long idle_ns) {
    __shared__ unsigned s_seq;
    __shared__ bool last;
    unsigned seen = 0;
    for (;;) {
        if (threadIdx.x == 0) {
            unsigned s;
            if (blockIdx.x == 0) {
                unsigned long long t0 = now_ns();
                for (;;) {
                    s = req->seq;
                    if (s != seen) break;
                    if ((long long)(now_ns() - t0) > idle_ns) { s = kExit; break; }
                }
                if (s != kExit) {
                    cmd->in = req->in;
                    cmd->n = req->n;
                    cmd->grid = req->grid;
                    __threadfence();
                }
                cmd->seq = s;
            } else {
                while ((s = cmd->seq) == seen) {}
                __threadfence();
            }
            s_seq = s;
        }
        __syncthreads();
        const unsigned s = s_seq;
        if (s == kExit) {
            if (blockIdx.x == 0 && threadIdx.x == 0) { __threadfence_system(); rep->exited = 1u; }
            return;
        }
        seen = s;
        const float *in = cmd->in;
        const unsigned long long n = cmd->n;
        const unsigned g = cmd->grid;
        for (unsigned b = blockIdx.x; b < g; b += gridDim.x) {
            float v = block_sum(share(in, n, b, g));
            if (threadIdx.x == 0) {
                partials[b] = v;
                __threadfence();
                last = atomicAdd(ticket, 1u) == g - 1;
            }
            __syncthreads();
            if (last) {
                __threadfence();
                float t = 0.f;
                for (unsigned i = threadIdx.x; i < g; i += blockDim.x) t += ((volatile float *)partials)[i];
                t = block_sum(t);
                if (threadIdx.x == 0) {
                    *ticket = 0;
                    rep->word = (unsigned long long)s << 32 | __float_as_uint(t);
                }
            }
            __syncthreads();
        }
    }
}

double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

unsigned grid_for(unsigned long long n) {
    unsigned long long g = (n + kBlock * 8 - 1) / (kBlock * 8);
    return g < 1 ? 1 : g > 264 ? 264 : unsigned(g);
}

}  // namespace

int main() {
    const int reps = 3000;
    const unsigned long long nmax = 1ull << 16;
    float *d_in, *partials;
    unsigned *ticket;
    CK(cudaMalloc(&d_in, nmax * sizeof(float)));
    CK(cudaMalloc(&partials, 4096 * sizeof(float)));
    CK(cudaMalloc(&ticket, sizeof(unsigned)));
    CK(cudaMemset(ticket, 0, sizeof(unsigned)));
    std::vector<float> h(nmax);
    for (unsigned long long i = 0; i < nmax; i++) h[i] = float(i % 7) - 3.f;
    CK(cudaMemcpy(d_in, h.data(), nmax * sizeof(float), cudaMemcpyHostToDevice));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaStream_t wst;
    CK(cudaStreamCreateWithFlags(&wst, cudaStreamNonBlocking));

    float *h_out;
    unsigned *h_flag;
    CK(cudaHostAlloc(&h_out, 64, cudaHostAllocMapped));
    CK(cudaHostAlloc(&h_flag, 64, cudaHostAllocMapped));
    Request *req;
    Reply *rep;
    CK(cudaHostAlloc(&req, sizeof(Request), cudaHostAllocMapped));
    CK(cudaHostAlloc(&rep, sizeof(Reply), cudaHostAllocMapped));
    Command *cmd;
    CK(cudaMalloc(&cmd, sizeof(Command)));

    /* cudaStreamQuery on an idle stream */
    {
        CK(cudaStreamSynchronize(st));
        std::vector<double> t;
        for (int i = 0; i < 20000; i++) {
            double a = now_us();
            if (cudaStreamQuery(st) != cudaSuccess) abort();
            t.push_back(now_us() - a);
        }
        printf("cudaStreamQuery idle: median %.3f us\n", median(t));
    }

    printf("%8s %10s %10s %12s %12s %12s %12s\n", "n", "graph us", "packed us", "resident K", "us", "min us", "value ok");
    for (unsigned long long n = 1ull << 8; n <= nmax; n <<= 2) {
        double want = 0;
        for (unsigned long long i = 0; i < n; i++) want += h[i];
        const unsigned g = grid_for(n);
        double tg[2];
        bool ok_g = true;
        for (int packed = 0; packed < 2; packed++) {
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            if (packed)
                single_pass<true><<<g, kBlock, 0, st>>>(d_in, n, partials, ticket, (float *)h_out, (volatile unsigned long long *)h_flag);
            else
                single_pass<false><<<g, kBlock, 0, st>>>(d_in, n, partials, ticket, (float *)h_out, (volatile unsigned long long *)h_flag);
            CK(cudaStreamEndCapture(st, &graph));
            CK(cudaGraphInstantiate(&exec, graph, 0));
            std::vector<double> t, tl;
            for (int r = 0; r < reps + 100; r++) {
                double a = now_us();
                *(volatile unsigned long long *)h_flag = 0;
                CK(cudaGraphLaunch(exec, st));
                double l = now_us();
                float v;
                if (packed) {
                    unsigned long long w;
                    while (((w = *(volatile unsigned long long *)h_flag) >> 32) == 0) {}
                    unsigned bits = unsigned(w);
                    memcpy(&v, &bits, 4);
                } else {
                    while (*(volatile unsigned *)h_flag == 0) {}
                    v = *(volatile float *)h_out;
                }
                double b = now_us();
                if (r >= 100) { t.push_back(b - a); tl.push_back(l - a); }
                if (v != float(want)) ok_g = false;
            }
            tg[packed] = median(t);
            if (packed == 0) printf("  (n %llu: cudaGraphLaunch itself %.3f us on the host)\n", n, median(tl));
            CK(cudaStreamSynchronize(st));
            CK(cudaGraphExecDestroy(exec));
            CK(cudaGraphDestroy(graph));
        }

        for (int K : {1, 4, 16, 32}) {
            memset((void *)req, 0, sizeof *req);
            memset((void *)rep, 0, sizeof *rep);
            CK(cudaMemset(cmd, 0, sizeof(Command)));
            CK(cudaDeviceSynchronize());
            resident<<<K, kBlock, 0, wst>>>(req, rep, cmd, partials, ticket, 200000000ll);
            CK(cudaGetLastError());
            std::vector<double> tr;
            bool ok_r = true;
            unsigned seq = 0;
            for (int r = 0; r < reps + 100; r++) {
                double a = now_us();
                req->in = d_in;
                req->n = n;
                req->grid = g;
                std::atomic_signal_fence(std::memory_order_seq_cst);
                req->seq = ++seq;
                double lim = a + 1e6;
                unsigned long long w;
                while (((w = rep->word) >> 32) != seq) {
                    if (now_us() > lim) { fprintf(stderr, "resident: no answer (K %d n %llu)\n", K, n); exit(1); }
                }
                unsigned bits = unsigned(w);
                float v;
                memcpy(&v, &bits, 4);
                double b = now_us();
                if (r >= 100) tr.push_back(b - a);
                if (v != float(want)) ok_r = false;
            }
            printf("%8llu %10.3f %10.3f %12d %12.3f %12.3f %8s/%s\n", n, tg[0], tg[1], K, median(tr),
                   *std::min_element(tr.begin(), tr.end()), ok_g ? "ok" : "BAD", ok_r ? "ok" : "BAD");
            /* the worker exits after 0.2 s of no request */
            double lim = now_us() + 2e6;
            while (!rep->exited) {
                if (now_us() > lim) { fprintf(stderr, "resident: did not exit\n"); exit(1); }
            }
            CK(cudaStreamSynchronize(wst));
        }
    }
    printf("done\n");
    return 0;
}
