#pragma once
// Switches and knobs from the environment, the one place that reads them.
//
// env_switch / env_is: benchmark switches and the race's flags (read where the caller says: per
// call, or once into a function-local static).
//
// Experiment knobs for the benchmarks that force launch shapes (benchmarks/reduce_knobs.py): off
// unless GPUKERN_<FAMILY>_KNOBS=1 was in the environment at the family's first call; then every
// call reads GPUKERN_<FAMILY>_<NAME> (an integer; unset or <= 0: the automatic value). Each
// family's dispatch keeps its own `on` flag (one static per calling function).
#include <cstdlib>
#include <cstring>
#include <string>

namespace gpukern {

// A switch from the environment: -1 unset, 0 for "0", else 1.
inline int env_switch(const char* name) {
  const char* env = std::getenv(name);
  return env == nullptr ? -1 : std::strcmp(env, "0") != 0;
}

// Whether the environment variable `name` is set to exactly `value`.
inline bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

// Whether GPUKERN_<family>_KNOBS is "1" (read by the caller once, into a function-local static).
inline bool knobs_enabled(const char* family) {
  const char* e = std::getenv((std::string("GPUKERN_") + family + "_KNOBS").c_str());
  return e != nullptr && std::string(e) == "1";
}

// GPUKERN_<family>_<name> as an integer, 0 when unset.
inline long long knob_value(const char* family, const char* name) {
  const char* v = std::getenv((std::string("GPUKERN_") + family + "_" + name).c_str());
  return v != nullptr ? std::atoll(v) : 0;
}

}  // namespace gpukern
