// Endpoint helpers (see ina/net/port.h).
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "ina/base/parse.h"
#include "ina/net/port.h"

namespace ina::net {

namespace {

// Where an endpoint keeps its L2 extras (port.h): sin_zero of an AF_INET endpoint; the bytes after
// the sockaddr_in6 of an AF_INET6 one (a RoCE peer, roce.h). MAC at [0, 6), via at [6, 8).
uint8_t* Extras(Endpoint* e) {
  if (e->addr.ss_family == AF_INET6)
    return reinterpret_cast<uint8_t*>(&e->addr) + sizeof(sockaddr_in6);
  return reinterpret_cast<sockaddr_in*>(&e->addr)->sin_zero;
}
const uint8_t* Extras(const Endpoint& e) { return Extras(const_cast<Endpoint*>(&e)); }

}  // namespace

void SetMac(Endpoint* e, const uint8_t mac[6]) { std::memcpy(Extras(e), mac, 6); }
void GetMac(const Endpoint& e, uint8_t mac[6]) { std::memcpy(mac, Extras(e), 6); }
void SetVia(Endpoint* e, uint16_t port_index) { std::memcpy(Extras(e) + 6, &port_index, 2); }
uint16_t GetVia(const Endpoint& e) {
  uint16_t v;
  std::memcpy(&v, Extras(e) + 6, 2);
  return v;
}

uint16_t EndpointPort(const Endpoint& e) {
  if (e.len == 0) return 0;
  if (e.addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6&>(e.addr).sin6_port);
  if (e.addr.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in&>(e.addr).sin_port);
  return 0;
}

void SetEndpointPort(Endpoint* e, uint16_t port) {
  if (e->addr.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&e->addr)->sin6_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in*>(&e->addr)->sin_port = htons(port);
  }
}

std::string EndpointToString(const Endpoint& e) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (e.len != 0 && e.addr.ss_family == AF_INET) {
    const auto& s = reinterpret_cast<const sockaddr_in&>(e.addr);
    inet_ntop(AF_INET, &s.sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(ntohs(s.sin_port));
  }
  if (e.len != 0 && e.addr.ss_family == AF_INET6) {
    const auto& s = reinterpret_cast<const sockaddr_in6&>(e.addr);
    inet_ntop(AF_INET6, &s.sin6_addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(s.sin6_port));
  }
  return "none";
}

Result<Endpoint> MakeEndpoint(const std::string& ip, uint16_t port) {
  Endpoint e;
  auto* s4 = reinterpret_cast<sockaddr_in*>(&e.addr);
  auto* s6 = reinterpret_cast<sockaddr_in6*>(&e.addr);
  if (inet_pton(AF_INET, ip.c_str(), &s4->sin_addr) == 1) {
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
    e.len = sizeof(sockaddr_in);
    return e;
  }
  e = Endpoint{};
  if (inet_pton(AF_INET6, ip.c_str(), &s6->sin6_addr) == 1) {
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    e.len = sizeof(sockaddr_in6);
    return e;
  }
  return InvalidArgument("net: '" + ip + "' is not an IPv4 or IPv6 address");
}

Result<Endpoint> ParseEndpoint(std::string_view v) {
  const bool v6 = v.starts_with("[");
  std::string host;
  std::string_view port;
  if (v6) {
    const size_t close = v.find("]:");
    if (close == std::string_view::npos) return InvalidArgument("no ]:PORT");
    host = std::string(v.substr(1, close - 1));
    port = v.substr(close + 2);
  } else {
    const size_t colon = v.rfind(':');
    if (colon == std::string_view::npos) return InvalidArgument("no :PORT");
    host = std::string(v.substr(0, colon));
    port = v.substr(colon + 1);
  }
  in_addr a4;
  in6_addr a6;
  if (v6 ? inet_pton(AF_INET6, host.c_str(), &a6) != 1
         : inet_pton(AF_INET, host.c_str(), &a4) != 1) {
    return InvalidArgument(std::string("not an ") + (v6 ? "IPv6" : "IPv4") + " address: " + host);
  }
  INA_ASSIGN_OR_RETURN(uint64_t p, ParseUint("port", std::string(port), 1, 65535));
  return MakeEndpoint(host, static_cast<uint16_t>(p));
}

}  // namespace ina::net
