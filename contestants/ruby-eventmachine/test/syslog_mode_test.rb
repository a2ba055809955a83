# frozen_string_literal: true

require_relative "live_server"

# --syslog-mode parse (the manifest's {syslog_mode}, spec §7.1): every message
# received over TCP (either framing) or UDP is parsed and counted once.
class SyslogModeTest < Minitest::Test
  include LiveServerClient

  FIELDS = %w[received parsed malformed rfc3164 sd_elements msg_bytes].freeze

  def server
    LiveServer.with("--syslog-mode", "parse")
  end

  def growth
    before = stats["syslog"].values_at(*FIELDS)
    yield
    eventually { stats["syslog"]["received"] > before.first }
    sleep 0.2
    FIELDS.zip(stats["syslog"].values_at(*FIELDS).zip(before).map { |now, was| now - was }).to_h
  end

  def test_parse_mode_counts_parsed_and_malformed_messages_apart
    valid = '<165>1 2026-11-25T20:00:00Z host app - ID47 [a@1 x="1"][b@2] event'
    bsd = "<34>Oct 11 22:14:15 mymachine su: two"
    counted = growth do
      TCPSocket.open("127.0.0.1", server.syslog_port) do |socket|
        socket.write("#{valid}\n<14>1 - host\n#{bsd.bytesize} #{bsd}<999>1 - h a - - - x\n")
      end
      UDPSocket.open { |socket| socket.send("<14>1 - host app - - - udp\n", 0, "127.0.0.1", server.syslog_port) }
    end
    assert_equal({ "received" => 5, "parsed" => 3, "malformed" => 2, "rfc3164" => 1, "sd_elements" => 2, "msg_bytes" => 11 },
                 counted)
    assert_equal "parse", stats["syslog"]["mode"]
  end

  def test_a_mode_other_than_count_or_parse_is_refused_at_start
    output = IO.popen(["ruby", File.join(LiveServer::ROOT, "server.rb"), "--port", "1", "--syslog-mode", "fast", { err: %i[child out] }], &:read)
    refute_predicate $?, :success?
    assert_includes output, "--syslog-mode"
  end
end
