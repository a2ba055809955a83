# frozen_string_literal: true

require "eventmachine"

module ServerlabEM
  # A held gRPC Subscribe stream as the push hub sees it: a subscriber in the
  # same event lists as long polls, SSE streams and WebSockets (one snapshot
  # spans them all, spec §6). The hub lives on the reactor thread, the call on
  # a thread of the gRPC server's pool, so the two meet in a thread-safe queue:
  # an emit cycle pushes one item per delivery, the call's thread pops it,
  # stamps `sent` and sends it. Joining and leaving run on the reactor
  # (EM.schedule from the call's threads); leaving closes the queue, which
  # ends the call.
  class GrpcSubscription < Subscriber
    # A stream this many deliveries behind (its client reads too slowly for
    # the cycles) is ended RESOURCE_EXHAUSTED rather than queued without bound.
    BACKLOG_LIMIT = 4096

    # One delivery of one cycle, as the call's thread needs it.
    Item = Struct.new(:emitter, :seq, :created, :total, :place, :data_json)

    attr_reader :queue

    def initialize(app, names)
      super(app, nil, :grpc, names, nil)
      @queue = Thread::Queue.new
      @overflowed = false
    end

    # Reactor thread: joins every list (unless the call ended first).
    def open
      join unless @queue.closed?
    end

    def queued?
      true
    end

    # Reactor thread. A stream too far behind is made gone here: it leaves,
    # and its call ends RESOURCE_EXHAUSTED once it has sent what it holds.
    def deliverable?
      return false unless @open
      return true if @queue.size < BACKLOG_LIMIT

      @overflowed = true
      leave
      false
    end

    # Reactor thread: counted when it is in the bounded queue (spec §6).
    def enqueue(emitter, seq, created, total, place, data_json)
      @app.stats.grpc_deliveries += 1
      @queue << Item.new(emitter, seq, created, total, place, data_json)
    end

    # Read by the call's thread once the queue is closed.
    def overflowed?
      @overflowed
    end

    # Reactor thread, and also when the stream is closed before it joined.
    def close
      leave
      @queue.close
    end

    private

    def left
      @queue.close
    end
  end
end
