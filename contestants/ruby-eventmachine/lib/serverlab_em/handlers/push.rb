# frozen_string_literal: true

require "json"

module ServerlabEM
  module Handlers
    EVENT_NAME = /\A[A-Za-z0-9_.-]{1,64}\z/.freeze

    MAX_EVENTS = 16

    def self.event_name?(value)
      value.is_a?(String) && value.match?(EVENT_NAME)
    end

    # 1 to 16 distinct event names: an SSE stream's or a WebSocket subscribe's.
    def self.event_names?(names)
      names.is_a?(Array) && (1..MAX_EVENTS).cover?(names.size) &&
        names.all? { |name| event_name?(name) } && names.uniq.size == names.size
    end

    # POST /event/set {"name", "interval_ms"}: the seed 004 Event Manager.
    class EventSet
      include JsonInput

      INTERVALS = (10..3_600_000).freeze

      def initialize(app)
        @app = app
      end

      def respond(connection, _request, sink)
        body = parse_object(sink)
        name = body["name"]
        interval = body["interval_ms"]
        return connection.respond_error(400, "name must be 1 to 64 letters, digits, _ . or -") unless Handlers.event_name?(name)
        return connection.respond_error(400, "interval_ms must be an integer from 10 to 3600000") unless integer_in?(interval, INTERVALS)

        replaced = @app.push_hub.set(name, interval)
        connection.respond_json(200, "name" => name, "interval_ms" => interval, "replaced" => replaced)
      rescue Invalid => e
        connection.respond_error(400, e.message)
      end
    end

    # POST /event/clear {"name"} stops one emitter; {} or no body stops all.
    class EventClear
      include JsonInput

      def initialize(app)
        @app = app
      end

      def respond(connection, _request, sink)
        name = sink.empty? ? nil : parse_object(sink)["name"]
        return connection.respond_error(400, "name must be a string or null") unless name.nil? || name.is_a?(String)
        return connection.respond_error(404, "unknown event") if name && !@app.push_hub.active?(name)

        connection.respond_json(200, "cleared" => @app.push_hub.clear(name))
      rescue Invalid => e
        connection.respond_error(400, e.message)
      end
    end

    # POST /push {"type", "events", "duration_ms"}: the seed 004 Request
    # Manager. The connection is held until an emit or the timeout answers it.
    class Push
      include JsonInput

      TYPES = %w[longpoll comet].freeze
      DURATIONS = (1..3_600_000).freeze

      def initialize(app)
        @app = app
      end

      def respond(connection, _request, sink)
        body = parse_object(sink)
        reason = invalid_reason(body)
        return connection.respond_error(400, reason) if reason

        subscription = Subscription.new(@app, connection, body["type"], body["events"].uniq, JSON.generate(body))
        subscription.open(body["duration_ms"])
      rescue Invalid => e
        connection.respond_error(400, e.message)
      end

      private

      def invalid_reason(body)
        type = body["type"]
        events = body["events"]
        duration = body["duration_ms"]
        return "type must be longpoll or comet" unless TYPES.include?(type)
        return "events must be a list of up to 16 event names" unless events.is_a?(Array) && events.size <= MAX_EVENTS
        return "event names must be 1 to 64 letters, digits, _ . or -" unless events.all? { |name| Handlers.event_name?(name) }
        return nil if duration.nil? && type == "comet"

        "duration_ms must be an integer from 1 to 3600000" unless integer_in?(duration, DURATIONS)
      end
    end
  end
end
