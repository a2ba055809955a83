# frozen_string_literal: true

require "securerandom"
require_relative "live_server"

# GET /ws (spec §11) on the real server, through a client written here on a
# raw socket, so that it can also send what no client library sends.
class WebSocketTest < Minitest::Test
  include LiveServerClient

  HANDSHAKE = "GET /ws HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n" \
              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
  TEXT = 1
  BINARY = 2
  CONTINUATION = 0
  CLOSE = 8
  PING = 9
  PONG = 10

  # A client frame: masked unless told otherwise.
  def frame(opcode, payload, fin: true, mask: true)
    payload = payload.b
    length = payload.bytesize
    head = [(fin ? 0x80 : 0) | opcode].pack("C")
    bit = mask ? 0x80 : 0
    head << if length <= 125 then [bit | length].pack("C")
            elsif length <= 65_535 then [bit | 126, length].pack("Cn")
            else [bit | 127, length].pack("CQ>")
            end
    return head + payload unless mask

    key = SecureRandom.random_bytes(4)
    head + key + payload.bytes.each_with_index.map { |byte, i| byte ^ key.getbyte(i % 4) }.pack("C*")
  end

  def connect(extra_headers = "")
    socket = TCPSocket.new("127.0.0.1", server.port)
    socket.write("#{HANDSHAKE}#{extra_headers}\r\n")
    head = +""
    head << socket.readpartial(1) until head.end_with?("\r\n\r\n")
    [socket, head]
  end

  def open_ws
    socket, head = connect
    assert_match(%r{\AHTTP/1.1 101 }, head)
    yield socket
  ensure
    socket&.close
  end

  def read_exactly(socket, size)
    data = +""
    data << socket.readpartial(size - data.bytesize) while data.bytesize < size
    data
  end

  # The next server frame as [opcode, payload]; server frames are unmasked.
  def read_frame(socket)
    raise "no frame within 5 s" unless socket.wait_readable(5)

    first, second = read_exactly(socket, 2).unpack("CC")
    length = second & 0x7f
    length = read_exactly(socket, 2).unpack1("n") if length == 126
    length = read_exactly(socket, 8).unpack1("Q>") if length == 127
    [first & 0x0f, read_exactly(socket, length)]
  end

  def send_json(socket, document)
    socket.write(frame(TEXT, JSON.generate(document)))
  end

  def read_json(socket)
    opcode, payload = read_frame(socket)
    assert_equal TEXT, opcode
    JSON.parse(payload)
  end

  # The server's close code (nil for a close without one), then its TCP close.
  def close_code(socket)
    opcode, payload = read_frame(socket)
    assert_equal CLOSE, opcode
    socket.write(frame(CLOSE, payload.byteslice(0, 2).to_s))
    assert socket.wait_readable(3), "the server kept TCP open"
    assert_nil socket.read_nonblock(1, exception: false)
    payload.empty? ? nil : payload.unpack1("n")
  end

  def test_handshake_declines_extensions_and_subprotocols
    socket, head = connect("Sec-WebSocket-Extensions: permessage-deflate\r\nSec-WebSocket-Protocol: chat\r\n")
    assert_match(%r{\AHTTP/1.1 101 Switching Protocols\r\n}, head)
    assert_includes head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
    refute_match(/Sec-WebSocket-(Extensions|Protocol)/i, head)
  ensure
    socket&.close
  end

  def test_echo_of_small_largest_and_fragmented_messages_with_a_ping_between
    before = stats["websocket"]
    open_ws do |socket|
      send_json(socket, "type" => "echo", "data" => { "é" => [true, nil] })
      assert_equal({ "type" => "echo", "data" => { "é" => [true, nil] } }, read_json(socket))
      bare = JSON.generate("type" => "echo", "data" => "").bytesize
      send_json(socket, "type" => "echo", "data" => "x" * (65_536 - bare))
      assert_equal 65_536 - bare, read_json(socket)["data"].size
      text = JSON.generate("type" => "echo", "data" => "fragments")
      socket.write(frame(TEXT, text[0, 5], fin: false) + frame(PING, "p!") + frame(CONTINUATION, text[5..]))
      assert_equal [PONG, "p!"], read_frame(socket)
      assert_equal "fragments", read_json(socket)["data"]
      assert_equal before["open"] + 1, stats["websocket"]["open"]
    end
    assert eventually { stats["websocket"]["open"] == before["open"] }
    after = stats["websocket"]
    assert_equal [1, 3], [after["total"] - before["total"], after["echoes"] - before["echoes"]]
  end

  def test_subscriber_gets_deliveries_and_publish_reaches_every_transport
    name = fresh_event("ws")
    open_ws do |subscriber|
      send_json(subscriber, "type" => "subscribe", "events" => [name])
      assert_equal({ "type" => "subscribed", "events" => [name] }, read_json(subscriber))
      post_json("/event/set", "name" => name, "interval_ms" => 30)
      deliveries = Array.new(3) { read_json(subscriber) }
      post_json("/event/clear", "name" => name)
      assert_equal [1, 2, 3], deliveries.map { |d| d.dig("response", "event", "seq") }
      assert_equal({ "type" => "subscribe", "events" => [name] }, deliveries.first["request"])
      refute(deliveries.any? { |d| d.key?("type") })
      # Emits that were on their way when the emitter stopped.
      seq = deliveries.last.dig("response", "event", "seq")
      seq = read_json(subscriber).dig("response", "event", "seq") while seq < stats.dig("events", name, "last_seq")
      poll = Thread.new { JSON.parse(post_json("/push", "type" => "longpoll", "events" => [name], "duration_ms" => 5000).body) }
      assert eventually { stats.dig("requests", "open_push").positive? }
      open_ws do |publisher|
        send_json(publisher, "type" => "publish", "event" => name, "data" => [1, "two"])
        assert_equal({ "type" => "published", "event" => name, "seq" => seq + 1, "total" => 2 }, read_json(publisher))
      end
      published = read_json(subscriber)["response"]["event"]
      polled = poll.value["response"]["event"]
      assert_equal [seq + 1, [1, "two"]], [published["seq"], published["data"]]
      assert_equal [published["seq"], published["timings"]["created"]], [polled["seq"], polled["timings"]["created"]]
      assert_equal [1, 2], [published, polled].map { |event| event["connections"]["place"] }.sort
    end
  end

  def test_close_is_answered_with_the_same_code_or_none
    open_ws do |socket|
      socket.write(frame(CLOSE, [1000].pack("n") + "bye"))
      opcode, payload = read_frame(socket)
      assert_equal [CLOSE, 1000], [opcode, payload.unpack1("n")]
      assert_nil socket.read_nonblock(1, exception: false) if socket.wait_readable(3)
    end
    open_ws do |socket|
      socket.write(frame(CLOSE, ""))
      assert_equal [CLOSE, ""], read_frame(socket)
    end
  end

  def test_bad_frames_and_messages_get_their_close_codes
    bare = JSON.generate("type" => "echo", "data" => "").bytesize
    {
      frame(TEXT, '{"type":"echo"}', mask: false) => 1002,
      frame(CONTINUATION, "x") => 1002,
      frame(BINARY, '{"type":"echo"}') => 1003,
      frame(TEXT, "{\"type\":\"echo\",\"data\":\"\xff\"}".b) => 1007,
      frame(TEXT, '{"type":"dance"}') => 1008,
      frame(TEXT, "[]") => 1008,
      frame(TEXT, JSON.generate("type" => "echo", "data" => "x" * (65_537 - bare))) => 1009
    }.each do |bad, code|
      open_ws do |socket|
        socket.write(bad)
        assert_equal code, close_code(socket)
      end
    end
    assert_equal "200", http { |client| client.get("/perf") }.code
  end

  def test_a_second_subscribe_is_refused
    open_ws do |socket|
      send_json(socket, "type" => "subscribe", "events" => ["a"])
      read_json(socket)
      send_json(socket, "type" => "subscribe", "events" => ["b"])
      assert_equal 1008, close_code(socket)
    end
  end

  def test_gone_subscriber_is_noticed_at_once
    before = stats["websocket"]
    socket, = connect
    send_json(socket, "type" => "subscribe", "events" => [fresh_event("gone")])
    read_json(socket)
    assert_equal before["subscribers"] + 1, stats["websocket"]["subscribers"]
    socket.close
    assert eventually(2) { stats["websocket"].values_at("subscribers", "open") == before.values_at("subscribers", "open") }
  end

  def test_refused_upgrades
    base = { "Upgrade" => "websocket", "Connection" => "Upgrade", "Sec-WebSocket-Key" => "dGhlIHNhbXBsZSBub25jZQ==",
             "Sec-WebSocket-Version" => "13" }
    [{}, base.merge("Connection" => "keep-alive"), base.merge("Sec-WebSocket-Key" => "c2hvcnQ="),
     base.reject { |key, _| key == "Sec-WebSocket-Version" }].each do |headers|
      assert_equal "400", http { |client| client.get("/ws", headers) }.code, headers.inspect
    end
    response = http { |client| client.get("/ws", base.merge("Sec-WebSocket-Version" => "12")) }
    assert_equal ["426", "13"], [response.code, response["Sec-WebSocket-Version"]]
    response = http { |client| client.post("/ws", "", "Content-Type" => "text/plain") }
    assert_equal ["405", "GET"], [response.code, response["Allow"]]
  end
end
