# frozen_string_literal: true

require_relative "live_server"

# --host (the manifest's {host}): the server listens on 127.0.0.1 and on the
# second address, HTTP and syslog alike; 127.0.0.2 stands in for a lab host.
class HostTest < Minitest::Test
  include LiveServerClient

  SECOND = "127.0.0.2"

  def server
    LiveServer.with("--host", SECOND)
  end

  def test_http_answers_on_both_addresses
    ["127.0.0.1", SECOND].each do |address|
      assert_equal "200", http(address) { |client| client.get("/perf") }.code, address
    end
  end

  def test_syslog_listens_on_the_second_address
    before = stats["syslog"]["received"]
    TCPSocket.open(SECOND, server.syslog_port) { |socket| socket.write("<14>1 - host app - - - tcp\n") }
    UDPSocket.open { |socket| socket.send("<14>1 - host app - - - udp\n", 0, SECOND, server.syslog_port) }
    assert eventually { stats["syslog"]["received"] == before + 2 }
  end

  def test_a_bad_address_is_refused_before_listening
    output = IO.popen(["ruby", File.join(LiveServer::ROOT, "server.rb"), "--port", "1", "--host", "lab-host", { err: %i[child out] }], &:read)
    refute_predicate $?, :success?
    assert_includes output, "--host lab-host is not an IP address"
  end
end
