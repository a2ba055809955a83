# frozen_string_literal: true

require "json"
require "uri"

module ServerlabEM
  module Handlers
    # GET /sse?events=a,b[&heartbeat_ms=N][&duration_ms=N] (spec §10): the
    # query and Last-Event-ID are checked here, the stream is an SseStream.
    class Sse
      include Bodiless

      class Invalid < StandardError; end

      # Lower bounds; heartbeat_ms may also be 0 (no heartbeats).
      NUMBERS = { "heartbeat_ms" => 10, "duration_ms" => 1 }.freeze
      MAX_NUMBER = 3_600_000
      DECIMAL = /\A\d{1,9}\z/.freeze
      POSITION = /\A([A-Za-z0-9_.-]{1,64}):(0|[1-9]\d{0,15})\z/.freeze
      MAX_SEQ = 2**53 - 1

      def initialize(app)
        @app = app
      end

      def respond(connection, request, _sink)
        body = self.class.request_of(request.query.to_s)
        named = self.class.position_of(request.env["HTTP_LAST_EVENT_ID"])
        SseStream.new(@app, connection, body, named).open
      rescue Invalid => e
        connection.respond_error(400, e.message)
      end

      # The stream's `request` (spec §10) from its query; Invalid if bad.
      def self.request_of(query)
        params = URI.decode_www_form(query).reject { |key, _| key.empty? }
        raise Invalid, "a parameter is given twice" unless params.map(&:first).uniq.size == params.size

        params = params.to_h
        body = { "type" => "sse", "events" => event_names(params["events"]) }
        NUMBERS.each do |key, low|
          body[key] = number(key, params[key], low) if params.key?(key)
        end
        body
      end

      def self.event_names(value)
        names = value.to_s.split(",", -1)
        raise Invalid, "events must be 1 to 16 distinct event names" unless Handlers.event_names?(names)

        names
      end

      def self.number(key, text, low)
        value = text.match?(DECIMAL) ? text.to_i : -1
        return value if (low..MAX_NUMBER).cover?(value) || (key == "heartbeat_ms" && value.zero?)

        raise Invalid, "#{key} is out of range"
      end

      # Last-Event-ID as {name => seq}; empty for a fresh stream.
      def self.position_of(header)
        return {} if header.nil? || header.empty?

        header.split(",", -1).each_with_object({}) do |pair, named|
          match = POSITION.match(pair)
          raise Invalid, "malformed last-event-id" unless match && !named.key?(match[1]) && match[2].to_i <= MAX_SEQ

          named[match[1]] = match[2].to_i
        end
      end
    end
  end
end
