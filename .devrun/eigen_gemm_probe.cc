// Session 19: Eigen 3.4's float32 GEMM on the GPT-2 mini step's shapes, with the cache sizes Eigen
// detects and three settings of Eigen::setCpuCacheSizes (.devrun/s19c.sh runs it). Built as
//   g++ -O3 -march=native|sapphirerapids|x86-64-v3 -fopenmp -I/usr/include/eigen3 \
//     eigen_gemm_probe.cc -o .devbin/probe/eg2[_spr|_avx2]
#include <Eigen/Dense>
#include <chrono>
#include <cstdio>
#include <cstdlib>
using RM = Eigen::Matrix<float, -1, -1, Eigen::RowMajor>;
template <class F> double t(F f){ f(); f(); auto a=std::chrono::steady_clock::now(); for(int i=0;i<5;i++) f(); return std::chrono::duration<double,std::milli>(std::chrono::steady_clock::now()-a).count()/5; }
void run(const char* tag){
  struct S{int M,K,N;} shapes[]={{2048,2048,2048},{2048,384,1152},{2048,384,8192},{2048,1536,384},{384,2048,1536}};
  for(auto s: shapes){
    RM a=RM::Random(s.M,s.K), b=RM::Random(s.K,s.N), c(s.M,s.N);
    double ms=t([&]{ c.noalias() = a*b; });
    printf("%-22s %dx%dx%d: %7.2f ms %6.1f GFLOP/s\n", tag, s.M,s.K,s.N, ms, 2.0*s.M*s.N*s.K/ms/1e6);
  }
}
int main(){
  printf("Eigen detected caches: l1 %td l2 %td l3 %td, threads %d\n", Eigen::l1CacheSize(), Eigen::l2CacheSize(), Eigen::l3CacheSize(), Eigen::nbThreads());
  run("default");
  Eigen::setCpuCacheSizes(48*1024, 2*1024*1024, 32*1024*1024); run("l1 48K l2 2M l3 32M");
  Eigen::setCpuCacheSizes(32*1024, 1024*1024, 32*1024*1024); run("l1 32K l2 1M l3 32M");
  Eigen::setCpuCacheSizes(48*1024, 2*1024*1024, 2*1024*1024); run("l1 48K l2 2M l3 2M");
}
