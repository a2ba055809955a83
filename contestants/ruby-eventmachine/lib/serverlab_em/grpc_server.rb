# frozen_string_literal: true

# Part `grpc` (spec §16): the service serverlab.v1.Lab on Debian's ruby-grpc
# (gRPC's C core under Ruby's synchronous server: a thread pool of its own),
# in the reactor's process, on {grpc_port} and, with the run's certificate,
# {grpc_tls_port}. Its message and service classes are generated from
# spec/grpc/serverlab.proto into build/ by `rake generate` (the manifest's
# build); nothing generated is committed.

GENERATED = File.expand_path("../../build", __dir__)
$LOAD_PATH.unshift(GENERATED) unless $LOAD_PATH.include?(GENERATED)
begin
  require "grpc"
  require "serverlab_services_pb"
rescue LoadError => e
  abort("server.rb: --grpc-port needs ruby-grpc and the generated classes (rake generate): #{e.message}")
end
require "ipaddr"
require_relative "grpc_subscription"

module ServerlabEM
  module Grpc
    # The versions this code was written against: GrpcServer and
    # SubscribeCall.core_call use ruby-grpc's internals, so `rake generate`
    # refuses any other.
    VERSIONS = { "grpc" => "1.51.1", "google-protobuf" => "3.21.12" }.freeze

    PERF_REPLY = Serverlab::V1::PerfReply.new(body: Handlers::Perf::BODY)

    # The methods; ruby-grpc runs each call on one thread of its pool.
    class LabService < Serverlab::V1::Lab::Service
      def initialize(app)
        super()
        @app = app
      end

      def perf(_request, _call)
        PERF_REPLY
      end

      def echo(message, _call)
        message
      end

      # Held until its deadline or its cancellation (or RESOURCE_EXHAUSTED when
      # too far behind): ruby-grpc sends each Delivery the enumerator yields.
      def subscribe(request, call)
        names = request.events.to_a
        unless Handlers.event_names?(names)
          raise GRPC::InvalidArgument, "events: 1 to 16 distinct names matching #{Handlers::EVENT_NAME.source}"
        end

        SubscribeCall.new(@app, names, call).deliveries
      end

      # ruby-grpc reads the next message only when the reply enumerator asks
      # for it, so each one is echoed as soon as it is read, in order; the
      # client's end of its side ends the enumerator, and the call OK.
      def chat(messages)
        messages
      end
    end

    # One Subscribe call: its subscription, the pool thread that sends its
    # deliveries, and a watcher thread that learns when the call ends.
    class SubscribeCall
      def initialize(app, names, call)
        @subscription = GrpcSubscription.new(app, names)
        @core = self.class.core_call(call)
        @ended = false
      end

      # ruby-grpc 1.51 gives a handler no way to learn that its client
      # cancelled (ActiveCall#cancelled? reads a status only a client call
      # gets): the C core's RECV_CLOSE_ON_SERVER, which completes when the
      # call ends (cancelled, past its deadline, or finished), is run on the
      # core call the handler's view wraps.
      def self.core_call(view)
        view.instance_variable_get(:@wrapped).instance_variable_get(:@call)
      end

      def deliveries
        watch
        Grpc.on_reactor { @subscription.open }
        Enumerator.new { |out| send_each(out) }
      end

      private

      def watch
        Thread.new do
          @core.run_batch(GRPC::Core::CallOps::RECV_CLOSE_ON_SERVER => nil)
        rescue GRPC::Core::CallError
          nil
        ensure
          @ended = true
          Grpc.on_reactor { @subscription.close }
        end
      end

      # Each delivery is stamped right before ruby-grpc encodes and sends it
      # (spec §6: `sent` immediately before the write), on this thread.
      def send_each(out)
        queue = @subscription.queue
        while (item = queue.pop)
          sent = Clock.now_ms
          item.emitter.raise_duration(item.seq, sent - item.created)
          out << delivery(item, sent)
        end
        raise end_status
      ensure
        Grpc.on_reactor { @subscription.close }
      end

      def delivery(item, sent)
        Serverlab::V1::Delivery.new(name: item.emitter.name, seq: item.seq, created: item.created, sent: sent,
                                    total: item.total, place: item.place, data: item.data_json.to_s)
      end

      # Why the queue closed. Past its deadline (DEADLINE_EXCEEDED) or
      # cancelled by its client, the C core has already ended the call: then
      # nothing more may be sent on it (1.51's core would write a second
      # trailers frame, CANCELLED, after its RST_STREAM), and a CallError is
      # the one exception ruby-grpc ends a handler on without sending a status.
      def end_status
        return GRPC::Core::CallError.new("the call has ended") if @ended && !@subscription.overflowed?

        GRPC::ResourceExhausted.new("the subscriber fell too far behind")
      end
    end

    # ruby-grpc's RpcServer, counting every call (/stats grpc.calls) and
    # naming the method it does not have.
    class GrpcServer < GRPC::RpcServer
      # The C core listens with SO_REUSEPORT unless told not to, which would
      # let a second server share a taken port instead of failing its start.
      def initialize(stats, threads)
        super(pool_size: threads, server_args: { "grpc.so_reuseport" => 0 })
        @stats = stats
      end

      # Runs on the server's one call loop thread, the counter's only writer.
      def new_active_server_call(an_rpc)
        @stats.grpc_calls += 1 if an_rpc&.call
        super
      end

      # 1.51 answers UNIMPLEMENTED with an empty grpc-message; spec §16 wants
      # a message beside every non-zero status.
      def implemented?(an_rpc)
        return an_rpc if rpc_descs.key?(an_rpc.method.to_sym)

        noop = proc { |x| x }
        call = GRPC::ActiveCall.new(an_rpc.call, noop, noop, an_rpc.deadline, metadata_received: true, started: false)
        call.send_status(GRPC::Core::StatusCodes::UNIMPLEMENTED, "unknown method #{an_rpc.method}")
        nil
      end
    end

    module_function

    # Runs the block on the reactor thread (the push hub's), from a call's
    # thread; nothing once the reactor has stopped (the server is stopping).
    def on_reactor(&block)
      EM.schedule(&block) if EM.reactor_running?
    rescue RuntimeError
      nil
    end

    # Starts the gRPC server on its own threads, on 127.0.0.1 and the --host
    # address; a port it cannot take stops the start with one line.
    def start(app, options, addresses)
      server = GrpcServer.new(app.stats, options[:grpc_threads])
      server.handle(LabService.new(app))
      addresses.each { |address| add_ports(server, address, options) }
      Thread.new { server.run }
      abort("server.rb: the gRPC server did not start") unless server.wait_till_running(10)
      server
    end

    def add_ports(server, address, options)
      host = IPAddr.new(address).ipv6? ? "[#{address}]" : address
      listen(server, host, options[:grpc_port], :this_port_is_insecure)
      listen(server, host, options[:grpc_tls_port], credentials(options)) if options[:grpc_tls_port]
    end

    def listen(server, host, port, credentials)
      server.add_http2_port("#{host}:#{port}", credentials)
    rescue RuntimeError
      abort("server.rb: gRPC cannot listen on #{host}:#{port} (the C core's log line above says why)")
    end

    # The run's certificate and key (spec §12); the C core answers ALPN h2.
    def credentials(options)
      pair = { private_key: File.read(options[:tls_key]), cert_chain: File.read(options[:tls_cert]) }
      GRPC::Core::ServerCredentials.new(nil, [pair], false)
    end
  end
end
