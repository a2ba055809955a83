# frozen_string_literal: true

require "eventmachine"

module ServerlabEM
  # One held POST /push request: a long poll answered once, or a comet stream
  # that gets one NDJSON line per emit.
  class Subscription < Subscriber
    NDJSON_TYPE = "application/x-ndjson"

    def initialize(app, connection, kind, names, request_json)
      super(app, connection, :push, names, request_json)
      @comet = kind == "comet"
      @timer = nil
    end

    def open(duration_ms)
      @connection.send_head(->(extra) { Responses.chunked(200, NDJSON_TYPE, extra) }) if @comet
      join
      @connection.on_close { leave }
      @timer = EM::Timer.new(duration_ms / 1000.0) { time_out } if duration_ms
    end

    def deliver(body, _name, _seq)
      @app.stats.responses_push += 1
      if @comet
        @connection.write_now(Responses.chunk("#{body}\n"))
      else
        leave
        @connection.respond(200, Responses::JSON_TYPE, body, now: true)
      end
    end

    private

    def time_out
      @timer = nil
      body = %({"response":{"timeout":true},#{answer_tail(Clock.now_ms, @app.push_hub.open_count)})
      @app.stats.responses_timeouts += 1
      leave
      if @comet
        @connection.send_data("#{Responses.chunk("#{body}\n")}#{Responses::LAST_CHUNK}")
        @connection.request_done
      else
        @connection.respond(200, Responses::JSON_TYPE, body)
      end
    end

    def left
      @timer&.cancel
      @timer = nil
    end
  end
end
