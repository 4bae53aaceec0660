// Must NOT compile: a mapping without wait_slots() used where a consumer waits. The test checks
// that the compiler's message names the primitive and the missing member.
#include "tilelink/tile/signal.cuh"

struct ProducerOnlyMapping {
  int32_t notify_slot(int32_t t) const { return t; }
  int32_t owner(int32_t) const { return 0; }
};

__global__ void consumer(tilelink::ll::Team team, const uint64_t* signals) {
  tilelink::tile::consumer_tile_wait(tilelink::tile::Block{}, team, ProducerOnlyMapping{}, signals, int32_t(0));
}
