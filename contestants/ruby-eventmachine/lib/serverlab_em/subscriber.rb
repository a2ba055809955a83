# frozen_string_literal: true

module ServerlabEM
  # What every push subscriber shares, whatever its transport (long poll,
  # comet, SSE stream, WebSocket, gRPC Subscribe): its event names, the envelope of its
  # deliveries (spec §6), and joining and leaving the hub's lists.
  class Subscriber
    # A stream reader this far behind is disconnected rather than buffered
    # without bound (EM's outbound buffer has no limit of its own).
    BACKLOG_LIMIT = 1024 * 1024

    attr_reader :names, :kind
    attr_accessor :start_count

    # kind: :push (long poll and comet), :sse, :websocket or :grpc, the open
    # count of /stats it is counted in.
    def initialize(app, connection, kind, names, request_json)
      @app = app
      @connection = connection
      @kind = kind
      @names = names
      @request_json = request_json
      @created = Clock.now_ms
      @open = false
    end

    # How every answer ends, after its "response": the request as received,
    # this subscriber's own timings, the open subscriber counts, and the
    # answer's closing brace.
    def answer_tail(sent, finish)
      %("request":#{@request_json},) +
        %("timings":{"duration":#{sent - @created},"sent":#{sent},"created":#{@created}},) +
        %("connections":{"start":#{@start_count},"finish":#{finish}}})
    end

    # True for a subscriber whose deliveries another thread stamps and
    # writes (a gRPC stream): the emit cycle hands it #enqueue, not #deliver.
    def queued?
      false
    end

    # False once the subscriber is gone; a reader too far behind is made gone
    # here (spec §6: a write to it failed), so the emit cycle skips it.
    def deliverable?
      return false unless @open
      return true if @connection.get_outbound_data_size <= BACKLOG_LIMIT

      @connection.close_connection
      leave
      false
    end

    # Leaves every event list; safe to call more than once.
    def leave
      return unless @open

      @open = false
      @app.push_hub.unsubscribe(self)
      left
    end

    private

    def join
      @app.push_hub.subscribe(self)
      @open = true
    end

    # What a transport releases when it leaves (its timers).
    def left; end
  end
end
