// Tells systemd how the node is doing when it runs as a Type=notify service
// (packaging/revis.service): READY=1 once the default tier's model is loaded
// and the port is listening, STOPPING=1 when shutdown begins, and WATCHDOG=1
// pings from the server's I/O thread while systemd asks for them
// (WatchdogSec=), so a wedged event loop gets the node restarted.
//
// Built with libsystemd (REVIS_HAVE_SYSTEMD) these are sd_notify calls, which
// do nothing when the process was not started by systemd (no NOTIFY_SOCKET);
// built without it (the arm64 cross build) they do nothing at all.
//
// Thread-safety: notify_* may be called from any thread; keep_watchdog_fed
// once, on the thread that runs `ioc`.
#pragma once

#include <string>

namespace boost::asio {
class io_context;
}

namespace revis::node {

void notify_ready(const std::string& status);
void notify_stopping(const std::string& status);
// When WATCHDOG_USEC is set for this process: WATCHDOG=1 every half of it,
// from a timer on `ioc`, until `ioc` stops.
void keep_watchdog_fed(boost::asio::io_context& ioc);

}  // namespace revis::node
