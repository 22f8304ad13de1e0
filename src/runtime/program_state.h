// What a Program and the Methods loaded from it share: the verified file and the host
// arena set of the host methods (placement rule 2).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "format/program_file.h"
#include "planrt/runtime/memory_manager.h"
#include "planrt/runtime/program.h"

namespace planrt {

// A set of arenas and the lock every run on it takes: the methods sharing a set overwrite
// each other's intermediates, so their runs must not interleave. Host sets serialize runs;
// a shared device set refuses a run that would wait (`refuse_overlap`): its runs may be on
// different streams and threads by design, and a silent wait would hide that.
struct ArenaSet {
  MemoryManager memory;
  std::mutex run_mu;
  bool refuse_overlap = false;
  std::mutex running_mu;  // guards `running`
  std::string running;    // refuse_overlap: the method running now ("" when none)
};

struct Program::State {
  explicit State(format::ProgramFile f);

  format::ProgramFile file;
  // Per buffer index, the largest size any host method asks for: computed at load (a few
  // integers), allocated only when the first host method is loaded.
  std::vector<uint64_t> shared_sizes;

  // The live shared host arenas, or the one to create. Weak: the set goes away when the last
  // Method holding it is destroyed (rule 5), and comes back at the next host load.
  Result<std::shared_ptr<ArenaSet>> acquire_shared_host(std::string_view method_name);
  bool shared_host_alive() const;

  // LoadMethodOptions::share_device_arenas: per device, the largest buffer any method with
  // device memory plans there (host first, std::map order), and the live set, one arena per
  // device in that order, created by the first such load. The set's buffer of device d is
  // at the index of d in shared_device_sizes.
  std::map<Device, uint64_t> shared_device_sizes;
  Result<std::shared_ptr<ArenaSet>> acquire_shared_device(std::string_view method_name);

 private:
  mutable std::mutex mu_;
  std::weak_ptr<ArenaSet> shared_host_;
  std::weak_ptr<ArenaSet> shared_device_;
};

}  // namespace planrt
