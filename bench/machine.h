// What a benchmark run records about the machine besides Google Benchmark's own context: how it gives transparent
// huge pages, which make page faults (a large part of reading a file and building its replay) 512 times rarer.
#pragma once

#include <benchmark/benchmark.h>

#include <fstream>
#include <string>

namespace memrec {

inline void add_machine_context() {
  for (const char* what : {"enabled", "defrag"}) {
    std::ifstream in(std::string("/sys/kernel/mm/transparent_hugepage/") + what);
    std::string line;
    std::getline(in, line);
    benchmark::AddCustomContext(std::string("transparent_hugepage_") + what, line.empty() ? "(unknown)" : line);
  }
}

}  // namespace memrec

// BENCHMARK_MAIN with the machine's context.
#define MEMREC_BENCHMARK_MAIN()                                          \
  int main(int argc, char** argv) {                                     \
    memrec::add_machine_context();                                      \
    benchmark::Initialize(&argc, argv);                                 \
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;   \
    benchmark::RunSpecifiedBenchmarks();                                \
    benchmark::Shutdown();                                              \
    return 0;                                                           \
  }
