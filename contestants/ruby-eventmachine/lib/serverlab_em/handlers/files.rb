# frozen_string_literal: true

module ServerlabEM
  module Handlers
    # GET|HEAD /files/<path>: a file below the document root, streamed.
    class Files
      include Bodiless

      PREFIX = "/files/"
      CONTENT_TYPE = "application/octet-stream"
      MALFORMED_ESCAPE = /%(?!\h\h)/n.freeze
      ESCAPE = /%(\h\h)/n.freeze

      def initialize(docroot, chunk_size)
        @root = File.realpath(docroot)
        @root_prefix = @root.end_with?("/") ? @root : "#{@root}/"
        @chunk_size = chunk_size
      end

      def respond(connection, request, _sink)
        relative = percent_decode(request.path.byteslice(PREFIX.bytesize..))
        return connection.respond_error(400, "malformed percent-encoding") unless relative

        reason = refusal(relative)
        return connection.respond_error(403, reason) if reason

        serve(connection, relative)
      end

      private

      def percent_decode(encoded)
        encoded = encoded.b
        return nil if encoded.match?(MALFORMED_ESCAPE)

        encoded.gsub(ESCAPE) { Regexp.last_match(1).hex.chr }
      end

      def refusal(relative)
        return "path contains a nul byte or backslash" if relative.include?("\0") || relative.include?("\\")
        return "absolute paths are refused" if relative.start_with?("/")

        "path traversal refused" if relative.split("/").include?("..")
      end

      def serve(connection, relative)
        path = File.realpath(File.join(@root, relative))
        return connection.respond_error(403, "path resolves outside the document root") unless path.start_with?(@root_prefix)

        file = File.open(path, "rb")
        stream(connection, file)
      rescue Errno::ENOENT, Errno::ENOTDIR, Errno::ELOOP, Errno::ENAMETOOLONG
        connection.respond_error(404, "no such file")
      rescue Errno::EACCES
        connection.respond_error(403, "permission denied")
      end

      def stream(connection, file)
        size = file.stat.file? ? file.size : nil
        unless size
          file.close
          return connection.respond_error(404, "not a regular file")
        end
        connection.send_head(->(extra) { Responses.fixed_length(200, CONTENT_TYPE, size, extra) })
        return finish_without_body(connection, file) if connection.head_request? || size.zero?

        streamer = FileStream.new(connection, file, @chunk_size) { connection.request_done }
        connection.on_close { streamer.stop }
        streamer.start
      end

      def finish_without_body(connection, file)
        file.close
        connection.request_done
      end
    end
  end
end
