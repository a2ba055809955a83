# frozen_string_literal: true

module ServerlabEM
  module Handlers
    # GET /perf: the fixed 84-byte body of seed 003.
    class Perf
      include Bodiless

      BODY = "serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n"
      CONTENT_TYPE = "text/plain"

      def respond(connection, _request, _sink)
        connection.respond(200, CONTENT_TYPE, BODY)
      end
    end
  end
end
