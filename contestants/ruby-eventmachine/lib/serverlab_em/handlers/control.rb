# frozen_string_literal: true

module ServerlabEM
  module Handlers
    # GET /timestamp?client=<ms>: the seed 004 Time Stamper.
    class Timestamp
      include Bodiless

      CLIENT_PARAM = /(?:\A|&)client=([^&]*)/.freeze

      def respond(connection, request, _sink)
        server = Clock.now_ms
        match = CLIENT_PARAM.match(request.query.to_s)
        return connection.respond_json(200, reply(server, nil)) unless match
        return connection.respond_error(400, "client must be a non-negative integer") unless match[1].match?(/\A\d{1,18}\z/)

        connection.respond_json(200, reply(server, match[1].to_i))
      end

      private

      def reply(server, client)
        { "server" => server, "client" => client, "offset_ms" => client && server - client }
      end
    end

    # POST /logging {"enabled": bool}: the seed 004 Log Manager.
    class Logging
      include JsonInput

      def initialize(app)
        @app = app
      end

      def respond(connection, _request, sink)
        enabled = parse_object(sink)["enabled"]
        return connection.respond_error(400, "enabled must be a boolean") unless [true, false].include?(enabled)

        @app.logging = enabled
        connection.respond_json(200, "enabled" => enabled)
      rescue Invalid => e
        connection.respond_error(400, e.message)
      end
    end

    # GET /stats: counters since start.
    class Stats
      include Bodiless

      def initialize(app)
        @app = app
      end

      def respond(connection, _request, _sink)
        connection.respond_json(200, @app.stats.snapshot(@app.push_hub))
      end
    end
  end
end
