// MpiWorld in a build configured with TILELINK_WITH_MPI=OFF: the class exists (the header is the
// same for every build), and making one says how to get it.
#include "tilelink/runtime/world.hpp"

namespace tilelink {

MpiWorld::MpiWorld(int*, char***, WorldOptions) {
  detail::fail("MpiWorld: this tilelink was built without MPI (TILELINK_WITH_MPI=OFF); configure it "
               "with -DTILELINK_WITH_MPI=ON, or make the world with InProcessWorld, or with ProcessWorld over "
               "your own bootstrap");
}

MpiWorld::~MpiWorld() = default;

}  // namespace tilelink
