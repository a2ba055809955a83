# frozen_string_literal: true

require "digest"
require_relative "live_server"

class ServerTest < Minitest::Test
  include LiveServerClient

  def test_perf_body_and_headers
    response = http { |client| client.get("/perf") }
    assert_equal "200", response.code
    assert_equal 84, response.body.bytesize
    assert_equal "84", response["Content-Length"]
    assert response["Date"]
    assert_equal "text/plain", response["Content-Type"]
  end

  def test_upload_with_content_length_and_chunked
    data = Random.new(1).bytes(2_000_000)
    expected = { "bytes" => data.bytesize, "sha256" => Digest::SHA256.hexdigest(data) }
    assert_equal expected, JSON.parse(http { |client| client.post("/upload", data, "Content-Type" => "application/octet-stream") }.body)
    chunked = data.bytes.each_slice(70_000).map { |part| "#{part.size.to_s(16)}\r\n#{part.pack('C*')}\r\n" }.join
    reply = raw("POST /upload HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n#{chunked}0\r\n\r\n".b)
    assert_equal expected, JSON.parse(reply.split("\r\n\r\n", 2).last)
  end

  def test_files_streamed_and_traversal_refused
    body = http { |client| client.get("/files/big.bin") }.body
    assert_equal File.binread(File.join(server.docroot, "big.bin")), body
    %w[/files/escape /files/%2e%2e/etc/passwd /files//etc/passwd /files/a%5cb].each do |path|
      assert_equal "403", http { |client| client.get(path) }.code, path
    end
    assert_includes raw("GET /files/../../etc/passwd HTTP/1.1\r\nConnection: close\r\n\r\n"), "403 Forbidden"
    assert_equal "404", http { |client| client.get("/files/missing") }.code
  end

  def test_bad_input_answers_and_server_survives
    assert_match(/\AHTTP\/1.1 431 /, raw("GET /perf HTTP/1.1\r\nX: #{'a' * 70_000}\r\n\r\n"))
    assert_match(/\AHTTP\/1.1 400 .*"error"/m, raw("NOT HTTP\r\n\r\n"))
    assert_equal "405", http { |client| client.delete("/perf") }.tap { |r| assert_equal "GET, HEAD", r["Allow"] }.code
    assert_equal "413", post_json("/event/set", JSON.generate("pad" => "x" * 70_000)).code
    assert_equal "400", post_json("/push", "{not json").code
    assert_equal "404", post_json("/event/clear", "name" => "never-set").code
    assert_equal "200", http { |client| client.get("/perf") }.code
  end

  def test_pipelined_requests_answer_in_order
    reply = raw("GET /perf HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\nGET /timestamp HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert_equal ["200", "404", "200"], reply.scan(%r{HTTP/1\.1 (\d{3}) }).flatten
  end

  # The 413 must arrive while the client is still sending, and the rest of
  # the body must not reset the connection before the client reads it.
  def test_oversize_json_answered_before_the_body_ends
    socket = TCPSocket.new("127.0.0.1", server.port)
    socket.write("POST /push HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n#{'x' * 100_000}")
    assert socket.wait_readable(5), "no answer while the body is still arriving"
    assert_match(/\AHTTP\/1.1 413 /, socket.readpartial(4096))
    socket.write("x" * 900_000)
    assert socket.wait_readable(5), "connection still open after the body ended"
    assert_nil socket.read_nonblock(1, exception: false), "expected a clean close"
  ensure
    socket&.close
  end

  def test_long_poll_delivery_then_timeout
    post_json("/event/set", "name" => "lp", "interval_ms" => 50)
    first = JSON.parse(post_json("/push", "type" => "longpoll", "events" => ["lp"], "duration_ms" => 5000).body)
    second = JSON.parse(post_json("/push", "type" => "longpoll", "events" => ["lp"], "duration_ms" => 5000).body)
    assert_equal "lp", first.dig("response", "event", "name")
    assert_operator second.dig("response", "event", "seq"), :>, first.dig("response", "event", "seq")
    refute_includes JSON.generate(first), "timeout"
    post_json("/event/clear", "name" => "lp")
    timeout = JSON.parse(post_json("/push", "type" => "longpoll", "events" => ["lp"], "duration_ms" => 100).body)
    assert_equal({ "timeout" => true }, timeout["response"])
  end

  def test_comet_lines_have_consecutive_seq
    post_json("/event/set", "name" => "cm", "interval_ms" => 30)
    body = JSON.generate("type" => "comet", "events" => ["cm"], "duration_ms" => 400)
    reply = raw("POST /push HTTP/1.1\r\nContent-Length: #{body.bytesize}\r\nConnection: close\r\n\r\n#{body}")
    post_json("/event/clear", "name" => "cm")
    assert_includes reply, "Transfer-Encoding: chunked"
    lines = reply.split("\r\n").select { |line| line.start_with?("{") }.map { |line| JSON.parse(line) }
    seqs = lines.filter_map { |line| line.dig("response", "event", "seq") }
    assert_operator seqs.size, :>=, 5
    assert_equal (seqs.first..seqs.last).to_a, seqs
    assert_equal({ "timeout" => true }, lines.last["response"])
  end

  def test_syslog_tcp_and_udp_are_counted
    before = stats["syslog"]
    message = "<14>1 - host app - - - seq=1 test"
    TCPSocket.open("127.0.0.1", server.syslog_port) do |socket|
      socket.write("#{message}\n#{message.bytesize} #{message}\n\n")
      socket.write("99 incomplete")
    end
    UDPSocket.open { |socket| socket.send("#{message}\n", 0, "127.0.0.1", server.syslog_port) }
    sleep 0.3
    after = stats["syslog"]
    assert_equal 3, after["received"] - before["received"]
    assert_equal 3 * message.bytesize, after["bytes"] - before["bytes"]
    assert_equal 1, after["tcp_connections"] - before["tcp_connections"]
  end

  def test_count_mode_parses_nothing
    TCPSocket.open("127.0.0.1", server.syslog_port) { |socket| socket.write("<14>1 - host app - - - ok\n<999>bad\n") }
    assert eventually { stats["syslog"]["received"] >= 2 }
    syslog = stats["syslog"]
    assert_equal "count", syslog["mode"]
    assert_equal [0] * 5, syslog.values_at("parsed", "malformed", "rfc3164", "sd_elements", "msg_bytes")
  end

  def test_control_endpoints_and_stats_shape
    assert_equal({ "enabled" => false }, JSON.parse(post_json("/logging", "enabled" => false).body))
    assert_equal "400", post_json("/logging", "enabled" => "yes").code
    stamp = JSON.parse(http { |client| client.get("/timestamp?client=1000") }.body)
    assert_equal stamp["server"] - 1000, stamp["offset_ms"]
    assert_equal "400", http { |client| client.get("/timestamp?client=abc") }.code
    snapshot = stats
    assert_equal %w[connections events grpc requests responses server spec_version sse syslog uptime_ms websocket], snapshot.keys.sort
    assert_operator snapshot.dig("connections", "open"), :>=, 1
  end
end
