# frozen_string_literal: true

require_relative "live_server"
require "English"
$LOAD_PATH.unshift(File.expand_path("../build", __dir__))
require "grpc"
require "serverlab_services_pb"

# Part grpc (spec §16) on the real server: ruby-grpc's client stub (the
# messages generated from the spec's .proto) against --grpc-port.
class GrpcTest < Minitest::Test
  include LiveServerClient

  GRPC_PORT = TCPServer.new("127.0.0.1", 0).then { |probe| probe.addr[1].tap { probe.close } }
  PERF_BODY = "serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n"
  # The largest request message the spec makes a server take, encoded: data
  # behind a one-byte tag and a four-byte length.
  ECHO_LIMIT = 4 * 1024 * 1024
  ECHO_OVERHEAD = 5

  def server
    LiveServer.with("--grpc-port", GRPC_PORT.to_s)
  end

  def lab
    server
    @lab ||= Serverlab::V1::Lab::Stub.new("127.0.0.1:#{GRPC_PORT}", :this_channel_is_insecure,
                                          channel_args: { "grpc.max_receive_message_length" => -1 })
  end

  def subscribe_request(*names)
    Serverlab::V1::SubscribeRequest.new(events: names)
  end

  def test_perf_answers_the_fixed_body_and_counts_a_call_and_a_request
    before = stats
    reply = lab.perf(Serverlab::V1::PerfRequest.new, deadline: Time.now + 5)
    assert_equal PERF_BODY, reply.body
    after = stats
    assert_equal 1, after.dig("grpc", "calls") - before.dig("grpc", "calls")
    # the call, and the /stats request that read the second snapshot
    assert_equal 2, after.dig("requests", "total") - before.dig("requests", "total")
  end

  def test_echo_returns_a_4_mib_message_and_refuses_one_byte_more_on_a_connection_that_serves_on
    data = Random.new(3).bytes(ECHO_LIMIT - ECHO_OVERHEAD)
    assert_equal data, lab.echo(Serverlab::V1::EchoMessage.new(data: data), deadline: Time.now + 10).data
    error = assert_raises(GRPC::ResourceExhausted) do
      lab.echo(Serverlab::V1::EchoMessage.new(data: "#{data}x"), deadline: Time.now + 10)
    end
    refute_empty error.details
    assert_equal PERF_BODY, lab.perf(Serverlab::V1::PerfRequest.new, deadline: Time.now + 5).body
  end

  def test_an_unknown_method_is_unimplemented_with_a_message
    error = assert_raises(GRPC::Unimplemented) do
      lab.request_response("/serverlab.v1.Lab/Nope", Serverlab::V1::PerfRequest.new,
                           Serverlab::V1::PerfRequest.method(:encode), Serverlab::V1::PerfReply.method(:decode),
                           deadline: Time.now + 5)
    end
    assert_match(/Nope/, error.details)
  end

  def test_a_subscribe_to_a_bad_name_or_none_is_invalid_argument
    [subscribe_request("bad name"), subscribe_request, subscribe_request("a", "a")].each do |request|
      assert_raises(GRPC::InvalidArgument) { lab.subscribe(request, deadline: Time.now + 5).to_a }
    end
  end

  # The server ends the call DEADLINE_EXCEEDED (verify's grpc.deadline reads
  # it off the wire); the client here is ruby-grpc 1.51's, which on a stream
  # that ends before any message may raise its own CallError ("outstanding
  # read") instead, so this judges the end's time and the server's open count.
  def test_a_subscribe_past_its_deadline_ends_in_time_and_leaves_the_open_count
    base = stats.dig("grpc", "open")
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    assert_raises(GRPC::DeadlineExceeded, GRPC::Core::CallError) do
      lab.subscribe(subscribe_request(fresh_event("gd")), deadline: Time.now + 0.3).to_a
    end
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 1.3
    assert eventually(2) { stats.dig("grpc", "open") == base }, "the stream past its deadline is still open"
  end

  # One snapshot spans every transport (spec §6): an SSE stream that
  # subscribed first is place 1, the gRPC stream place 2 of 2.
  def test_subscribe_shares_each_emit_cycle_with_an_sse_stream
    event = fresh_event("gs")
    sse = TCPSocket.new("127.0.0.1", server.port)
    sse.write("GET /sse?events=#{event}&heartbeat_ms=0 HTTP/1.1\r\n\r\n")
    assert eventually { stats.dig("sse", "open").positive? }
    before = stats
    deliveries = subscribed(event)
    post_json("/event/set", "name" => event, "interval_ms" => 50)
    received = Array.new(3) { deliveries.next }
    post_json("/event/clear", "name" => event)
    assert_equal [event], received.map(&:name).uniq
    first = received.first.seq
    assert_equal [first, first + 1, first + 2], received.map(&:seq)
    received.each do |delivery|
      assert_equal [2, 2], [delivery.total, delivery.place]
      assert_operator delivery.created, :<=, delivery.sent
      assert_equal "", delivery.data
    end
    assert_operator stats.dig("grpc", "deliveries") - before.dig("grpc", "deliveries"), :>=, 3
  ensure
    unsubscribe
    sse&.close
  end

  # A WebSocket's publish (spec §11) is an emit cycle too: its data reaches
  # the gRPC stream as JSON text.
  def test_a_publish_cycle_reaches_a_subscribe_stream_with_its_data
    event = fresh_event("gp")
    deliveries = subscribed(event)
    socket = TCPSocket.new("127.0.0.1", server.port)
    socket.write("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" \
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    socket.readpartial(4096)
    socket.write(masked_text_frame(JSON.generate("type" => "publish", "event" => event, "data" => { "n" => 1 })))
    assert_equal({ "n" => 1 }, JSON.parse(deliveries.next.data))
  ensure
    unsubscribe
    socket&.close
  end

  # A Subscribe stream to `event`, open on the server when this returns. Left
  # to its deadline, a stream would leave the server's open count mid-way
  # through a later test that reads it (CI: "the stream never opened"), so
  # the test cancels it with `unsubscribe` and waits for the count.
  def subscribed(event)
    @open_before = stats.dig("grpc", "open")
    @subscription = lab.subscribe(subscribe_request(event), deadline: Time.now + 10, return_op: true)
    deliveries = @subscription.execute.each
    assert eventually { stats.dig("grpc", "open") == @open_before + 1 }, "the stream never opened"
    deliveries
  end

  def unsubscribe
    return unless @subscription

    @subscription.cancel
    assert eventually(2) { stats.dig("grpc", "open") == @open_before }, "the cancelled stream is still open"
  end

  def masked_text_frame(payload)
    mask = "\x01\x02\x03\x04".b
    masked = payload.bytes.each_with_index.map { |byte, index| byte ^ mask.getbyte(index % 4) }.pack("C*")
    [0x81, 0x80 | payload.bytesize].pack("CC") + mask + masked
  end

  def test_a_cancelled_subscribe_leaves_the_open_count
    base = stats.dig("grpc", "open")
    operation = lab.subscribe(subscribe_request(fresh_event("gc")), deadline: Time.now + 30, return_op: true)
    reader = Thread.new do
      operation.execute.to_a
    rescue GRPC::Cancelled, GRPC::Core::CallError # the 1.51 client's, as above
      nil
    end
    assert eventually { stats.dig("grpc", "open") == base + 1 }, "the stream never opened"
    operation.cancel
    assert eventually(2) { stats.dig("grpc", "open") == base }, "the cancelled stream is still open"
    reader.join(5)
  end

  def test_a_taken_grpc_port_stops_the_start_with_one_line
    taken = TCPServer.new("127.0.0.1", 0)
    port = TCPServer.new("127.0.0.1", 0).then { |probe| probe.addr[1].tap { probe.close } }
    output = IO.popen(["ruby", File.join(LiveServer::ROOT, "server.rb"), "--port", port.to_s,
                       "--grpc-port", taken.addr[1].to_s], err: %i[child out], &:read)
    refute $CHILD_STATUS.success?
    assert_equal "server.rb: gRPC cannot listen on 127.0.0.1:#{taken.addr[1]} (the C core's log line above says why)",
                 output.lines.last.chomp
  ensure
    taken&.close
  end

  def test_chat_echoes_each_message_before_the_next_is_sent_and_ends_ok
    outbox = Thread::Queue.new
    requests = Enumerator.new { |out| while (message = outbox.pop) do out << message end }
    replies = lab.chat(requests, deadline: Time.now + 10).each
    words = Array.new(4) { |number| "message #{number} " * (1 + number * 100) }
    echoed = words.map do |word|
      outbox << Serverlab::V1::EchoMessage.new(data: word)
      replies.next.data
    end
    outbox.close
    assert_raises(StopIteration) { replies.next }
    assert_equal words, echoed
  end
end
