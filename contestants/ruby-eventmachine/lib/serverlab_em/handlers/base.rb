# frozen_string_literal: true

require "json"

module ServerlabEM
  module Handlers
    DISCARD = DiscardSink.new

    # Handlers without a request body of their own drain whatever is sent.
    module Bodiless
      def body_sink(_request)
        DISCARD
      end
    end

    # Handlers that take a JSON object as their body.
    module JsonInput
      class Invalid < StandardError; end

      def body_sink(_request)
        JsonSink.new
      end

      def parse_object(sink)
        value = JSON.parse(sink.text)
        raise Invalid, "json body must be an object" unless value.is_a?(Hash)

        value
      rescue JSON::ParserError, EncodingError
        raise Invalid, "malformed json"
      end

      def integer_in?(value, range)
        value.is_a?(Integer) && range.cover?(value)
      end
    end

    # Any 4xx decided before the body is read (unknown path, wrong method,
    # non-loopback control client).
    class Error
      include Bodiless

      def initialize(status, reason, extra_headers = nil)
        @status = status
        @reason = reason
        @extra_headers = extra_headers
      end

      def respond(connection, _request, _sink)
        connection.respond_error(@status, @reason, @extra_headers)
      end
    end
  end
end
