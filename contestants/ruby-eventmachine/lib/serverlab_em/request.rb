# frozen_string_literal: true

module ServerlabEM
  # One parsed request head. env is the CGI-style hash Thin's C parser fills.
  class Request
    attr_reader :env, :method, :path, :query

    def initialize(env)
      @env = env
      @method = env["REQUEST_METHOD"]
      @path = env["REQUEST_PATH"] || env["PATH_INFO"] || ""
      @query = env["QUERY_STRING"]
    end

    def http10?
      @env["HTTP_VERSION"] == "HTTP/1.0"
    end

    # HTTP/1.1 connections persist unless the client says close; HTTP/1.0 ones
    # only when the client asks for keep-alive.
    def keep_alive?
      connection = @env["HTTP_CONNECTION"]
      if http10?
        !connection.nil? && connection.match?(/\bkeep-alive\b/i)
      else
        connection.nil? || !connection.match?(/\bclose\b/i)
      end
    end

    def head?
      @method == "HEAD"
    end

    def expects_continue?
      expect = @env["HTTP_EXPECT"]
      !expect.nil? && expect.casecmp?("100-continue")
    end
  end
end
