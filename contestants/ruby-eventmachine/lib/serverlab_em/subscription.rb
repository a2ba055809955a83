# frozen_string_literal: true

require "eventmachine"

module ServerlabEM
  # One held POST /push request: a long poll answered once, or a comet stream
  # that gets one NDJSON line per emit.
  class Subscription
    NDJSON_TYPE = "application/x-ndjson"

    attr_reader :names
    attr_accessor :start_count

    def initialize(app, connection, kind, names, request_json)
      @app = app
      @connection = connection
      @comet = kind == "comet"
      @names = names
      @request_json = request_json
      @created = Clock.now_ms
      @timer = nil
      @open = false
    end

    def open(duration_ms)
      @connection.send_head(->(extra) { Responses.chunked(200, NDJSON_TYPE, extra) }) if @comet
      @app.push_hub.subscribe(self)
      @open = true
      @connection.on_close { leave }
      @timer = EM::Timer.new(duration_ms / 1000.0) { time_out } if duration_ms
    end

    # The fields every answer shares: the request as received, this
    # request's own timings and the open push request counts.
    def envelope(sent, finish)
      %("request":#{@request_json},) +
        %("timings":{"duration":#{sent - @created},"sent":#{sent},"created":#{@created}},) +
        %("connections":{"start":#{@start_count},"finish":#{finish}})
    end

    def deliver(body)
      if @comet
        @connection.send_data(Responses.chunk("#{body}\n"))
      else
        leave
        @connection.respond(200, Responses::JSON_TYPE, body)
      end
    end

    private

    def time_out
      @timer = nil
      body = %({"response":{"timeout":true},#{envelope(Clock.now_ms, @app.push_hub.open_count)}})
      @app.stats.responses_timeouts += 1
      leave
      if @comet
        @connection.send_data("#{Responses.chunk("#{body}\n")}#{Responses::LAST_CHUNK}")
        @connection.request_done
      else
        @connection.respond(200, Responses::JSON_TYPE, body)
      end
    end

    # Leaves every event list; safe to call more than once.
    def leave
      return unless @open

      @open = false
      @timer&.cancel
      @timer = nil
      @app.push_hub.unsubscribe(self)
    end
  end
end
