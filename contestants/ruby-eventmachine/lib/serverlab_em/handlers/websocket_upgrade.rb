# frozen_string_literal: true

module ServerlabEM
  module Handlers
    # GET /ws (spec §11): the handshake is checked here, so that a refusal
    # gets the spec's JSON error (426 for a wrong version); a valid one
    # becomes a WebSocketSession on this same connection.
    class WebSocketUpgrade
      include Bodiless

      KEY = %r{\A[A-Za-z0-9+/]{22}==\z}.freeze
      VERSION = "13"
      VERSION_HEADER = "Sec-WebSocket-Version: #{VERSION}\r\n".freeze

      def initialize(app)
        @app = app
      end

      def respond(connection, request, _sink)
        status, reason, extra = self.class.refusal(request.env)
        return connection.respond_error(status, reason, extra) if status

        session = WebSocketSession.new(@app, connection, request.env)
        connection.respond_error(400, "malformed sec-websocket-extensions") unless session.start
      end

      # Why a request to /ws is not a valid upgrade: [status, reason, extra
      # headers], or nil.
      def self.refusal(env)
        return [400, "a websocket upgrade is required"] unless env["HTTP_UPGRADE"].to_s.casecmp?("websocket")
        return [400, "connection: upgrade is required"] unless upgrade_token?(env["HTTP_CONNECTION"])

        version = env["HTTP_SEC_WEBSOCKET_VERSION"]
        return [400, "sec-websocket-version is required"] unless version
        return [426, "sec-websocket-version 13 only", VERSION_HEADER] unless version == VERSION

        [400, "sec-websocket-key is not 16 bytes in base64"] unless env["HTTP_SEC_WEBSOCKET_KEY"].to_s.match?(KEY)
      end

      def self.upgrade_token?(connection)
        connection.to_s.split(",").any? { |token| token.strip.casecmp?("upgrade") }
      end
    end
  end
end
