// Google Benchmark's console table, plus each benchmark's mean real and CPU time over its runs,
// which a benchmark's own reporter turns into the ratios it prints last: each figure against a
// baseline measured in the same run, because these machines are noisy (docs/benchmarks.md).
//
// Threads: Google Benchmark calls reporters on the thread that runs the benchmarks (main's).
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

namespace syncd::bench {

class MeanTimesReporter : public benchmark::ConsoleReporter {
 public:
  struct Times {
    double real = 0, cpu = 0;  // sums over the runs, in the benchmark's time unit
    int runs = 0;
    double mean_real() const { return runs ? real / runs : 0; }
    double mean_cpu() const { return runs ? cpu / runs : 0; }
  };

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred) continue;
      Times& t = times_[key(run)];
      t.real += run.GetAdjustedRealTime();
      t.cpu += run.GetAdjustedCPUTime();
      ++t.runs;
    }
  }

 protected:
  // What a run's times are kept under; by default its whole name (arguments and suffixes).
  virtual std::string key(const Run& run) const { return run.run_name.str(); }
  // The times kept under name, or empty ones (runs == 0) when nothing ran under it.
  Times at(const std::string& name) const {
    const auto it = times_.find(name);
    return it == times_.end() ? Times{} : it->second;
  }

  std::map<std::string, Times> times_;
};

// main() for a benchmark: the command line's selection, run through reporter.
inline int run_benchmarks(int argc, char** argv, benchmark::BenchmarkReporter& reporter) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}

}  // namespace syncd::bench
