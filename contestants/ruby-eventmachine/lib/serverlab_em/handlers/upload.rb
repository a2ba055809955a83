# frozen_string_literal: true

module ServerlabEM
  module Handlers
    # POST /upload: the body is hashed chunk by chunk as the reactor reads it.
    class Upload
      def body_sink(_request)
        DigestSink.new
      end

      def respond(connection, _request, sink)
        connection.respond_json(200, "bytes" => sink.bytes, "sha256" => sink.hexdigest)
      end
    end
  end
end
