// `revis serve --broker`: the node with NATS JetStream as its transport
// (docs/scale-out.md). Connects (in the background if no server answers
// yet), pulls with broker/worker.h, takes its own clients' tickets with
// broker/desk.h, shows the broker in /v1/revis/status ("broker"),
// /v1/revis/cluster and /metrics, and serves until SIGINT/SIGTERM.
//
// Thread-safety: called once, from main's thread.
#pragma once

#include "node/node.h"

namespace revis::broker {

// node::serve's exit code, or 1 when the broker settings are unusable.
int serve_with_broker(node::Node& node);

}  // namespace revis::broker
