# frozen_string_literal: true

require_relative "live_server"
require_relative "../lib/serverlab_em"

# GET /sse (spec §10) on the real server, read off a raw socket.
class SseTest < Minitest::Test
  include LiveServerClient

  # One SSE message: its fields, or its comment for a heartbeat.
  Message = Struct.new(:event, :id, :data, :comment)

  # The head and the messages of a stream that ends by itself (duration_ms);
  # Connection: close makes the server close once the body is complete.
  def read_stream(query, last_event_id: nil)
    extra = last_event_id ? "Last-Event-ID: #{last_event_id}\r\n" : ""
    reply = raw("GET /sse?#{query} HTTP/1.1\r\n#{extra}Connection: close\r\n\r\n", quiet_after: 5)
    head, body = reply.split("\r\n\r\n", 2)
    [head, parse_messages(dechunk(body))]
  end

  def dechunk(body)
    text = +""
    until body.empty?
      size, rest = body.split("\r\n", 2)
      length = size.to_i(16)
      break if length.zero?

      text << rest.byteslice(0, length)
      body = rest.byteslice(length + 2..)
    end
    text
  end

  def parse_messages(text)
    text.split("\n\n").map do |block|
      message = Message.new
      block.split("\n").each do |line|
        field, value = line.split(": ", 2)
        field.empty? ? message.comment = value : message[field] = value
      end
      message
    end
  end

  def seq_of(message)
    JSON.parse(message.data).dig("response", "event", "seq")
  end

  def test_stream_with_two_events_has_composite_ids_and_ends_with_timeout
    first, second = fresh_event("sa"), fresh_event("sb")
    before = stats["sse"]
    post_json("/event/set", "name" => first, "interval_ms" => 40)
    post_json("/event/set", "name" => second, "interval_ms" => 70)
    head, messages = read_stream("events=#{first}%2C#{second}&duration_ms=500&heartbeat_ms=0")
    post_json("/event/clear", {})
    assert_match(%r{\AHTTP/1.1 200 OK\r\n}, head)
    assert_match(%r{^Content-Type: text/event-stream\r$}, head)
    assert_match(/^Cache-Control: no-cache\r$/, head)
    assert_equal Message.new(nil, "#{first}:0,#{second}:0"), messages.first, "the opening message"
    timeout = messages.pop
    assert_equal "timeout", timeout.event
    assert_nil timeout.id
    assert_equal({ "timeout" => true }, JSON.parse(timeout.data)["response"])
    events = messages.drop(1)
    seqs = { first => [], second => [] }
    events.each do |message|
      delivery = JSON.parse(message.data)
      name = delivery.dig("response", "event", "name")
      seqs[name] << seq_of(message)
      assert_equal "#{first}:#{seqs[first].last || 0},#{second}:#{seqs[second].last || 0}", message.id
      assert_equal({ "type" => "sse", "events" => [first, second], "heartbeat_ms" => 0, "duration_ms" => 500 }, delivery["request"])
    end
    seqs.each_value { |list| assert_equal (1..list.size).to_a, list }
    assert_operator seqs[first].size, :>=, 5
    after = stats["sse"]
    assert_equal 1, after["total"] - before["total"]
    assert_equal events.size, after["deliveries"] - before["deliveries"]
    assert_equal 1, after["timeouts"] - before["timeouts"]
    assert_equal before["open"], after["open"]
  end

  def test_heartbeats_are_comments
    before = stats["sse"]["heartbeats"]
    _head, messages = read_stream("events=#{fresh_event('hb')}&heartbeat_ms=50&duration_ms=400")
    comments = messages.map(&:comment).compact
    # Eight fit in 400 ms; a busy machine may fire the timer late, not early.
    assert_includes 3..8, comments.size
    assert_equal ["heartbeat"], comments.uniq
    assert_equal comments.size, stats["sse"]["heartbeats"] - before
  end

  def test_reconnect_replays_what_was_missed_and_an_old_id_gets_a_gap
    name = fresh_event("rp")
    post_json("/event/set", "name" => name, "interval_ms" => 10)
    eventually { stats.dig("events", name, "last_seq").to_i >= 80 }
    post_json("/event/clear", "name" => name)
    last = stats.dig("events", name, "last_seq")
    _head, messages = read_stream("events=#{name}&duration_ms=50", last_event_id: "#{name}:#{last - 3}")
    replayed = messages.select(&:data).reject { |m| m.event == "timeout" }
    assert_equal [last - 2, last - 1, last], replayed.map { |m| seq_of(m) }
    assert(replayed.all? { |m| JSON.parse(m.data).dig("response", "event", "replayed") })
    assert_equal "#{name}:#{last}", messages[3].id, "the opening message after the replays"

    _head, messages = read_stream("events=#{name}&duration_ms=50", last_event_id: "#{name}:1")
    gap = messages.first
    assert_equal "gap", gap.event
    assert_equal({ "gap" => { "name" => name, "after" => 1, "next" => last - 63 } }, JSON.parse(gap.data))
    assert_equal ((last - 63)..last).to_a, messages.select { |m| m.data && m.event.nil? }.map { |m| seq_of(m) }

    _head, messages = read_stream("events=#{name}&duration_ms=50", last_event_id: "#{name}:#{last + 10}")
    assert_equal({ "gap" => { "name" => name, "after" => last + 10, "next" => last + 1 } }, JSON.parse(messages.first.data))
    assert_equal "#{name}:#{last}", messages.first.id
  end

  def test_gone_stream_is_noticed_at_once
    before = stats["sse"]["open"]
    socket = TCPSocket.new("127.0.0.1", server.port)
    socket.write("GET /sse?events=#{fresh_event('gone')} HTTP/1.1\r\n\r\n")
    socket.readpartial(4096)
    assert eventually { stats["sse"]["open"] == before + 1 }
    socket.close
    assert eventually(2) { stats["sse"]["open"] == before }
  end

  def test_bad_parameters_get_400
    ["", "events=", "events=a,a", "events=a,%20b", "events=#{(1..17).map { |n| "e#{n}" }.join(',')}",
     "events=a&heartbeat_ms=5", "events=a&heartbeat_ms=1e3", "events=a&duration_ms=0",
     "events=a&events=b"].each do |query|
      assert_equal "400", http { |client| client.get("/sse?#{query}") }.code, query
    end
    assert_equal "400", http { |client| client.get("/sse?events=a", "Last-Event-ID" => "a:017") }.code
    response = http { |client| client.post("/sse?events=a", "", "Content-Type" => "text/plain") }
    assert_equal ["405", "GET"], [response.code, response["Allow"]]
  end

  def test_query_and_position_parsing
    sse = ServerlabEM::Handlers::Sse
    assert_equal({ "type" => "sse", "events" => %w[a b], "heartbeat_ms" => 0 }, sse.request_of("events=a%2Cb&heartbeat_ms=0&other=1"))
    assert_equal({ "a" => 17, "b" => 0 }, sse.position_of("a:17,b:0"))
    assert_equal({}, sse.position_of(""))
    ["a:1,a:2", "a:", "a:#{2**53}", "a b:1", "17"].each do |header|
      assert_raises(sse::Invalid, header) { sse.position_of(header) }
    end
  end
end
