// WorldOptions against the environment: explicit options, then env vars, then defaults; bad
// values give an error naming the variable.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "runtime/options.hpp"

namespace tilelink {
namespace {

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    resolve_options(WorldOptions{}, env_of(vars));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Options, Defaults) {
  const ResolvedOptions r = resolve_options(WorldOptions{}, env_of({}));
  EXPECT_EQ(r.heap_bytes, size_t(2048) << 20);
  EXPECT_EQ(r.signal_slots, 65536u);
  EXPECT_EQ(r.wait_timeout_ms, 5000u);
  EXPECT_EQ(r.barrier_timeout_ms, 60000u) << "at least 60 s";
}

TEST(Options, DefaultSignalSlotsGrowWithTheWorld) {
  for (int w : {1, 2, 8}) EXPECT_EQ(resolve_options(WorldOptions{}, env_of({}), w).signal_slots, 65536u) << w;
  EXPECT_EQ(resolve_options(WorldOptions{}, env_of({}), 9).signal_slots, 2 * 65536u);
  EXPECT_EQ(resolve_options(WorldOptions{}, env_of({}), 16).signal_slots, 2 * 65536u);
  EXPECT_EQ(resolve_options(WorldOptions{}, env_of({}), 1024).signal_slots, 128 * 65536u);
  // An explicit count, or the environment's, is taken as it is.
  EXPECT_EQ(resolve_options(WorldOptions{}, env_of({{"TILELINK_SIGNAL_SLOTS", "4096"}}), 64).signal_slots, 4096u);
  WorldOptions o;
  o.signal_slots = 1000;
  EXPECT_EQ(resolve_options(o, env_of({}), 64).signal_slots, 1000u);
}

TEST(Options, EnvironmentOverridesDefaults) {
  const ResolvedOptions r = resolve_options(
      WorldOptions{}, env_of({{"TILELINK_HEAP_MB", "64"},
                              {"TILELINK_SIGNAL_SLOTS", "4096"},
                              {"TILELINK_WAIT_TIMEOUT_MS", "30000"}}));
  EXPECT_EQ(r.heap_bytes, size_t(64) << 20);
  EXPECT_EQ(r.signal_slots, 4096u);
  EXPECT_EQ(r.wait_timeout_ms, 30000u);
  EXPECT_EQ(r.barrier_timeout_ms, 120000u) << "4x the wait timeout once that exceeds 60 s";
  const ResolvedOptions b =
      resolve_options(WorldOptions{}, env_of({{"TILELINK_BARRIER_TIMEOUT_MS", "250"}}));
  EXPECT_EQ(b.barrier_timeout_ms, 250u);
}

TEST(Options, ExplicitOptionsWin) {
  WorldOptions o;
  o.heap_bytes = 12345678;
  o.signal_slots = 77;
  o.wait_timeout_ms = 10;
  o.barrier_timeout_ms = 20;
  const ResolvedOptions r = resolve_options(
      o, env_of({{"TILELINK_HEAP_MB", "not even a number"}, {"TILELINK_WAIT_TIMEOUT_MS", "x"}}));
  EXPECT_EQ(r.heap_bytes, 12345678u);
  EXPECT_EQ(r.signal_slots, 77u);
  EXPECT_EQ(r.wait_timeout_ms, 10u);
  EXPECT_EQ(r.barrier_timeout_ms, 20u);
}

TEST(Options, EmptyVariableMeansUnset) {
  EXPECT_EQ(resolve_options(WorldOptions{}, env_of({{"TILELINK_HEAP_MB", ""}})).heap_bytes,
            size_t(2048) << 20);
}

TEST(Options, SurroundingSpacesAreAccepted) {
  EXPECT_EQ(resolve_options(WorldOptions{}, env_of({{"TILELINK_HEAP_MB", " 128 "}})).heap_bytes,
            size_t(128) << 20);
}

TEST(Options, BadValuesNameTheVariableAndTheText) {
  for (const char* bad : {"abc", "-1", "0", "12x", "1.5", "99999999999999999999999", "2000000"}) {
    const std::string msg = error_of({{"TILELINK_HEAP_MB", bad}});
    EXPECT_NE(msg.find("TILELINK_HEAP_MB='" + std::string(bad) + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MiB"), std::string::npos) << msg;
  }
  const std::string msg = error_of({{"TILELINK_WAIT_TIMEOUT_MS", "soon"}});
  EXPECT_NE(msg.find("TILELINK_WAIT_TIMEOUT_MS='soon'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("an integer from 1 to"), std::string::npos) << msg;
  EXPECT_NE(error_of({{"TILELINK_SIGNAL_SLOTS", "0"}}).find("TILELINK_SIGNAL_SLOTS"),
            std::string::npos);
  EXPECT_NE(error_of({{"TILELINK_BARRIER_TIMEOUT_MS", "-5"}}).find("TILELINK_BARRIER_TIMEOUT_MS"),
            std::string::npos);
}

TEST(Options, ParseEnvIntegerBounds) {
  EXPECT_EQ(parse_env_integer("X", "5", 5, 10, "x"), 5u);
  EXPECT_EQ(parse_env_integer("X", "10", 5, 10, "x"), 10u);
  EXPECT_THROW(parse_env_integer("X", "4", 5, 10, "x"), Error);
  EXPECT_THROW(parse_env_integer("X", "11", 5, 10, "x"), Error);
  EXPECT_THROW(parse_env_integer("X", "", 5, 10, "x"), Error);
  EXPECT_THROW(parse_env_integer("X", "+7", 5, 10, "x"), Error);
}

TEST(Transport, DefaultsToCudaIpcAndFollowsTheEnvironment) {
  EXPECT_EQ(resolve_transport(Transport::automatic, env_of({})), Transport::cuda_ipc);
  EXPECT_EQ(resolve_transport(Transport::automatic, env_of({{"TILELINK_TRANSPORT", ""}})), Transport::cuda_ipc);
  EXPECT_EQ(resolve_transport(Transport::automatic, env_of({{"TILELINK_TRANSPORT", "nvshmem"}})),
            Transport::nvshmem);
  EXPECT_EQ(resolve_transport(Transport::automatic, env_of({{"TILELINK_TRANSPORT", "cuda_ipc"}})),
            Transport::cuda_ipc);
}

TEST(Transport, AnExplicitChoiceWins) {
  EXPECT_EQ(resolve_transport(Transport::cuda_ipc, env_of({{"TILELINK_TRANSPORT", "nvshmem"}})),
            Transport::cuda_ipc);
  EXPECT_EQ(resolve_transport(Transport::nvshmem, env_of({})), Transport::nvshmem);
}

TEST(Transport, UnknownNamesAreErrorsThatNameTheVariable) {
  for (const char* text : {"NVSHMEM", "ipc", "nvshmem ", "mpi"}) {
    std::string message = "(no error)";
    try {
      resolve_transport(Transport::automatic, env_of({{"TILELINK_TRANSPORT", text}}));
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("TILELINK_TRANSPORT='" + std::string(text) + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("cuda_ipc or nvshmem"), std::string::npos) << message;
  }
  EXPECT_THROW(resolve_transport(static_cast<Transport>(7), env_of({})), Error);
}

TEST(OneNodePerProcess, OffUnlessAskedForByOptionOrEnvironment) {
  EXPECT_FALSE(resolve_one_node_per_process(false, env_of({})));
  EXPECT_FALSE(resolve_one_node_per_process(false, env_of({{"TILELINK_ONE_NODE_PER_PROCESS", ""}})));
  EXPECT_FALSE(resolve_one_node_per_process(false, env_of({{"TILELINK_ONE_NODE_PER_PROCESS", "0"}})));
  EXPECT_TRUE(resolve_one_node_per_process(false, env_of({{"TILELINK_ONE_NODE_PER_PROCESS", "1"}})));
  EXPECT_TRUE(resolve_one_node_per_process(true, env_of({{"TILELINK_ONE_NODE_PER_PROCESS", "0"}})));
  for (const char* text : {"yes", "2", "-1", "true"}) {
    std::string message = "(no error)";
    try {
      resolve_one_node_per_process(false, env_of({{"TILELINK_ONE_NODE_PER_PROCESS", text}}));
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("TILELINK_ONE_NODE_PER_PROCESS='" + std::string(text) + "'"), std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace tilelink
