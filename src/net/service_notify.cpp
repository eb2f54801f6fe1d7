#include "net/service_notify.h"

#include <chrono>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#ifdef REVIS_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace revis::node {
namespace {

void notify(const std::string& state) {
#ifdef REVIS_HAVE_SYSTEMD
  sd_notify(0, state.c_str());
#else
  (void)state;
#endif
}

#ifdef REVIS_HAVE_SYSTEMD
void ping_every(const std::shared_ptr<boost::asio::steady_timer>& timer, std::chrono::microseconds interval) {
  notify("WATCHDOG=1");
  timer->expires_after(interval);
  timer->async_wait([timer, interval](const boost::system::error_code& ec) {
    if (!ec) ping_every(timer, interval);
  });
}
#endif

}  // namespace

void notify_ready(const std::string& status) { notify("READY=1\nSTATUS=" + status); }

void notify_stopping(const std::string& status) { notify("STOPPING=1\nSTATUS=" + status); }

void keep_watchdog_fed(boost::asio::io_context& ioc) {
#ifdef REVIS_HAVE_SYSTEMD
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return;
  ping_every(std::make_shared<boost::asio::steady_timer>(ioc), std::chrono::microseconds(usec / 2));
#else
  (void)ioc;
#endif
}

}  // namespace revis::node
