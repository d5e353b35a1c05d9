package dev.groundwire.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Configured agents and their execution.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class AgentServiceGrpc {

  private AgentServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "groundwire.v1.AgentService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.ListAgentsRequest,
      dev.groundwire.v1.ListAgentsResponse> getListAgentsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListAgents",
      requestType = dev.groundwire.v1.ListAgentsRequest.class,
      responseType = dev.groundwire.v1.ListAgentsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.ListAgentsRequest,
      dev.groundwire.v1.ListAgentsResponse> getListAgentsMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.ListAgentsRequest, dev.groundwire.v1.ListAgentsResponse> getListAgentsMethod;
    if ((getListAgentsMethod = AgentServiceGrpc.getListAgentsMethod) == null) {
      synchronized (AgentServiceGrpc.class) {
        if ((getListAgentsMethod = AgentServiceGrpc.getListAgentsMethod) == null) {
          AgentServiceGrpc.getListAgentsMethod = getListAgentsMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.ListAgentsRequest, dev.groundwire.v1.ListAgentsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListAgents"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ListAgentsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ListAgentsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AgentServiceMethodDescriptorSupplier("ListAgents"))
              .build();
        }
      }
    }
    return getListAgentsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.GetAgentRequest,
      dev.groundwire.v1.GetAgentResponse> getGetAgentMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetAgent",
      requestType = dev.groundwire.v1.GetAgentRequest.class,
      responseType = dev.groundwire.v1.GetAgentResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.GetAgentRequest,
      dev.groundwire.v1.GetAgentResponse> getGetAgentMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.GetAgentRequest, dev.groundwire.v1.GetAgentResponse> getGetAgentMethod;
    if ((getGetAgentMethod = AgentServiceGrpc.getGetAgentMethod) == null) {
      synchronized (AgentServiceGrpc.class) {
        if ((getGetAgentMethod = AgentServiceGrpc.getGetAgentMethod) == null) {
          AgentServiceGrpc.getGetAgentMethod = getGetAgentMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.GetAgentRequest, dev.groundwire.v1.GetAgentResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetAgent"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.GetAgentRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.GetAgentResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AgentServiceMethodDescriptorSupplier("GetAgent"))
              .build();
        }
      }
    }
    return getGetAgentMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.ExecuteRequest,
      dev.groundwire.v1.ExecuteResponse> getExecuteMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Execute",
      requestType = dev.groundwire.v1.ExecuteRequest.class,
      responseType = dev.groundwire.v1.ExecuteResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.ExecuteRequest,
      dev.groundwire.v1.ExecuteResponse> getExecuteMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.ExecuteRequest, dev.groundwire.v1.ExecuteResponse> getExecuteMethod;
    if ((getExecuteMethod = AgentServiceGrpc.getExecuteMethod) == null) {
      synchronized (AgentServiceGrpc.class) {
        if ((getExecuteMethod = AgentServiceGrpc.getExecuteMethod) == null) {
          AgentServiceGrpc.getExecuteMethod = getExecuteMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.ExecuteRequest, dev.groundwire.v1.ExecuteResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Execute"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ExecuteRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ExecuteResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AgentServiceMethodDescriptorSupplier("Execute"))
              .build();
        }
      }
    }
    return getExecuteMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.ExecuteStreamRequest,
      dev.groundwire.v1.ExecuteStreamResponse> getExecuteStreamMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ExecuteStream",
      requestType = dev.groundwire.v1.ExecuteStreamRequest.class,
      responseType = dev.groundwire.v1.ExecuteStreamResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.ExecuteStreamRequest,
      dev.groundwire.v1.ExecuteStreamResponse> getExecuteStreamMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.ExecuteStreamRequest, dev.groundwire.v1.ExecuteStreamResponse> getExecuteStreamMethod;
    if ((getExecuteStreamMethod = AgentServiceGrpc.getExecuteStreamMethod) == null) {
      synchronized (AgentServiceGrpc.class) {
        if ((getExecuteStreamMethod = AgentServiceGrpc.getExecuteStreamMethod) == null) {
          AgentServiceGrpc.getExecuteStreamMethod = getExecuteStreamMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.ExecuteStreamRequest, dev.groundwire.v1.ExecuteStreamResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ExecuteStream"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ExecuteStreamRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ExecuteStreamResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AgentServiceMethodDescriptorSupplier("ExecuteStream"))
              .build();
        }
      }
    }
    return getExecuteStreamMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.PrepareExecutionRequest,
      dev.groundwire.v1.PrepareExecutionResponse> getPrepareExecutionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "PrepareExecution",
      requestType = dev.groundwire.v1.PrepareExecutionRequest.class,
      responseType = dev.groundwire.v1.PrepareExecutionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.PrepareExecutionRequest,
      dev.groundwire.v1.PrepareExecutionResponse> getPrepareExecutionMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.PrepareExecutionRequest, dev.groundwire.v1.PrepareExecutionResponse> getPrepareExecutionMethod;
    if ((getPrepareExecutionMethod = AgentServiceGrpc.getPrepareExecutionMethod) == null) {
      synchronized (AgentServiceGrpc.class) {
        if ((getPrepareExecutionMethod = AgentServiceGrpc.getPrepareExecutionMethod) == null) {
          AgentServiceGrpc.getPrepareExecutionMethod = getPrepareExecutionMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.PrepareExecutionRequest, dev.groundwire.v1.PrepareExecutionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "PrepareExecution"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.PrepareExecutionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.PrepareExecutionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AgentServiceMethodDescriptorSupplier("PrepareExecution"))
              .build();
        }
      }
    }
    return getPrepareExecutionMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static AgentServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AgentServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AgentServiceStub>() {
        @java.lang.Override
        public AgentServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AgentServiceStub(channel, callOptions);
        }
      };
    return AgentServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static AgentServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AgentServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AgentServiceBlockingV2Stub>() {
        @java.lang.Override
        public AgentServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AgentServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return AgentServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static AgentServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AgentServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AgentServiceBlockingStub>() {
        @java.lang.Override
        public AgentServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AgentServiceBlockingStub(channel, callOptions);
        }
      };
    return AgentServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static AgentServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AgentServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AgentServiceFutureStub>() {
        @java.lang.Override
        public AgentServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AgentServiceFutureStub(channel, callOptions);
        }
      };
    return AgentServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Configured agents and their execution.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Lists the configured agents (safe descriptions). Paginated.
     * </pre>
     */
    default void listAgents(dev.groundwire.v1.ListAgentsRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ListAgentsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListAgentsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Describes one agent. Errors: NOT_FOUND (AGENT_NOT_FOUND).
     * </pre>
     */
    default void getAgent(dev.groundwire.v1.GetAgentRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.GetAgentResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetAgentMethod(), responseObserver);
    }

    /**
     * <pre>
     * Runs one agent turn and returns its result. Errors: INVALID_ARGUMENT (bad
     * input), NOT_FOUND (AGENT_NOT_FOUND), FAILED_PRECONDITION
     * (RAG_CONTEXT_BUDGET_EXCEEDED, INVALID_RAG_POLICY, NO_ACCEPTED_CONTEXT),
     * UNAVAILABLE (RAG_RETRIEVAL_FAILED, RERANKER_FAILED, MODEL_UNAVAILABLE,
     * MODEL_RATE_LIMITED, MODEL_INVALID_RESPONSE), DEADLINE_EXCEEDED.
     * </pre>
     */
    default void execute(dev.groundwire.v1.ExecuteRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getExecuteMethod(), responseObserver);
    }

    /**
     * <pre>
     * Runs one agent turn, streaming its execution events. Request validation
     * errors end the call with a status before any event; every later outcome is
     * reported by exactly one terminal event (completed or failed).
     * </pre>
     */
    default void executeStream(dev.groundwire.v1.ExecuteStreamRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteStreamResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getExecuteStreamMethod(), responseObserver);
    }

    /**
     * <pre>
     * Runs every RAG stage of one agent turn exactly as Execute would (query
     * rewriting, retrieval, acceptance, reranking, answerability, context
     * budget, prompt assembly) and returns the exact messages and tools the
     * model would receive, with the references and the applied limits, without
     * calling the model ("retrieve without LLM call"). The response exposes
     * the assembled prompt, including the agent's instructions, so it needs the
     * `prepare` permission (EXECUTE alone is not enough). Errors: as Execute,
     * plus PERMISSION_DENIED (PERMISSION_DENIED) without that permission.
     * </pre>
     */
    default void prepareExecution(dev.groundwire.v1.PrepareExecutionRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.PrepareExecutionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getPrepareExecutionMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service AgentService.
   * <pre>
   * Configured agents and their execution.
   * </pre>
   */
  public static abstract class AgentServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return AgentServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service AgentService.
   * <pre>
   * Configured agents and their execution.
   * </pre>
   */
  public static final class AgentServiceStub
      extends io.grpc.stub.AbstractAsyncStub<AgentServiceStub> {
    private AgentServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AgentServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AgentServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists the configured agents (safe descriptions). Paginated.
     * </pre>
     */
    public void listAgents(dev.groundwire.v1.ListAgentsRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ListAgentsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListAgentsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Describes one agent. Errors: NOT_FOUND (AGENT_NOT_FOUND).
     * </pre>
     */
    public void getAgent(dev.groundwire.v1.GetAgentRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.GetAgentResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetAgentMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Runs one agent turn and returns its result. Errors: INVALID_ARGUMENT (bad
     * input), NOT_FOUND (AGENT_NOT_FOUND), FAILED_PRECONDITION
     * (RAG_CONTEXT_BUDGET_EXCEEDED, INVALID_RAG_POLICY, NO_ACCEPTED_CONTEXT),
     * UNAVAILABLE (RAG_RETRIEVAL_FAILED, RERANKER_FAILED, MODEL_UNAVAILABLE,
     * MODEL_RATE_LIMITED, MODEL_INVALID_RESPONSE), DEADLINE_EXCEEDED.
     * </pre>
     */
    public void execute(dev.groundwire.v1.ExecuteRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getExecuteMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Runs one agent turn, streaming its execution events. Request validation
     * errors end the call with a status before any event; every later outcome is
     * reported by exactly one terminal event (completed or failed).
     * </pre>
     */
    public void executeStream(dev.groundwire.v1.ExecuteStreamRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteStreamResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getExecuteStreamMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Runs every RAG stage of one agent turn exactly as Execute would (query
     * rewriting, retrieval, acceptance, reranking, answerability, context
     * budget, prompt assembly) and returns the exact messages and tools the
     * model would receive, with the references and the applied limits, without
     * calling the model ("retrieve without LLM call"). The response exposes
     * the assembled prompt, including the agent's instructions, so it needs the
     * `prepare` permission (EXECUTE alone is not enough). Errors: as Execute,
     * plus PERMISSION_DENIED (PERMISSION_DENIED) without that permission.
     * </pre>
     */
    public void prepareExecution(dev.groundwire.v1.PrepareExecutionRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.PrepareExecutionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getPrepareExecutionMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service AgentService.
   * <pre>
   * Configured agents and their execution.
   * </pre>
   */
  public static final class AgentServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<AgentServiceBlockingV2Stub> {
    private AgentServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AgentServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AgentServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists the configured agents (safe descriptions). Paginated.
     * </pre>
     */
    public dev.groundwire.v1.ListAgentsResponse listAgents(dev.groundwire.v1.ListAgentsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListAgentsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Describes one agent. Errors: NOT_FOUND (AGENT_NOT_FOUND).
     * </pre>
     */
    public dev.groundwire.v1.GetAgentResponse getAgent(dev.groundwire.v1.GetAgentRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetAgentMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs one agent turn and returns its result. Errors: INVALID_ARGUMENT (bad
     * input), NOT_FOUND (AGENT_NOT_FOUND), FAILED_PRECONDITION
     * (RAG_CONTEXT_BUDGET_EXCEEDED, INVALID_RAG_POLICY, NO_ACCEPTED_CONTEXT),
     * UNAVAILABLE (RAG_RETRIEVAL_FAILED, RERANKER_FAILED, MODEL_UNAVAILABLE,
     * MODEL_RATE_LIMITED, MODEL_INVALID_RESPONSE), DEADLINE_EXCEEDED.
     * </pre>
     */
    public dev.groundwire.v1.ExecuteResponse execute(dev.groundwire.v1.ExecuteRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getExecuteMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs one agent turn, streaming its execution events. Request validation
     * errors end the call with a status before any event; every later outcome is
     * reported by exactly one terminal event (completed or failed).
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, dev.groundwire.v1.ExecuteStreamResponse>
        executeStream(dev.groundwire.v1.ExecuteStreamRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getExecuteStreamMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs every RAG stage of one agent turn exactly as Execute would (query
     * rewriting, retrieval, acceptance, reranking, answerability, context
     * budget, prompt assembly) and returns the exact messages and tools the
     * model would receive, with the references and the applied limits, without
     * calling the model ("retrieve without LLM call"). The response exposes
     * the assembled prompt, including the agent's instructions, so it needs the
     * `prepare` permission (EXECUTE alone is not enough). Errors: as Execute,
     * plus PERMISSION_DENIED (PERMISSION_DENIED) without that permission.
     * </pre>
     */
    public dev.groundwire.v1.PrepareExecutionResponse prepareExecution(dev.groundwire.v1.PrepareExecutionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getPrepareExecutionMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service AgentService.
   * <pre>
   * Configured agents and their execution.
   * </pre>
   */
  public static final class AgentServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<AgentServiceBlockingStub> {
    private AgentServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AgentServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AgentServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists the configured agents (safe descriptions). Paginated.
     * </pre>
     */
    public dev.groundwire.v1.ListAgentsResponse listAgents(dev.groundwire.v1.ListAgentsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListAgentsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Describes one agent. Errors: NOT_FOUND (AGENT_NOT_FOUND).
     * </pre>
     */
    public dev.groundwire.v1.GetAgentResponse getAgent(dev.groundwire.v1.GetAgentRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetAgentMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs one agent turn and returns its result. Errors: INVALID_ARGUMENT (bad
     * input), NOT_FOUND (AGENT_NOT_FOUND), FAILED_PRECONDITION
     * (RAG_CONTEXT_BUDGET_EXCEEDED, INVALID_RAG_POLICY, NO_ACCEPTED_CONTEXT),
     * UNAVAILABLE (RAG_RETRIEVAL_FAILED, RERANKER_FAILED, MODEL_UNAVAILABLE,
     * MODEL_RATE_LIMITED, MODEL_INVALID_RESPONSE), DEADLINE_EXCEEDED.
     * </pre>
     */
    public dev.groundwire.v1.ExecuteResponse execute(dev.groundwire.v1.ExecuteRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getExecuteMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs one agent turn, streaming its execution events. Request validation
     * errors end the call with a status before any event; every later outcome is
     * reported by exactly one terminal event (completed or failed).
     * </pre>
     */
    public java.util.Iterator<dev.groundwire.v1.ExecuteStreamResponse> executeStream(
        dev.groundwire.v1.ExecuteStreamRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getExecuteStreamMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs every RAG stage of one agent turn exactly as Execute would (query
     * rewriting, retrieval, acceptance, reranking, answerability, context
     * budget, prompt assembly) and returns the exact messages and tools the
     * model would receive, with the references and the applied limits, without
     * calling the model ("retrieve without LLM call"). The response exposes
     * the assembled prompt, including the agent's instructions, so it needs the
     * `prepare` permission (EXECUTE alone is not enough). Errors: as Execute,
     * plus PERMISSION_DENIED (PERMISSION_DENIED) without that permission.
     * </pre>
     */
    public dev.groundwire.v1.PrepareExecutionResponse prepareExecution(dev.groundwire.v1.PrepareExecutionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getPrepareExecutionMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service AgentService.
   * <pre>
   * Configured agents and their execution.
   * </pre>
   */
  public static final class AgentServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<AgentServiceFutureStub> {
    private AgentServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AgentServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AgentServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists the configured agents (safe descriptions). Paginated.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.ListAgentsResponse> listAgents(
        dev.groundwire.v1.ListAgentsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListAgentsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Describes one agent. Errors: NOT_FOUND (AGENT_NOT_FOUND).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.GetAgentResponse> getAgent(
        dev.groundwire.v1.GetAgentRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetAgentMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Runs one agent turn and returns its result. Errors: INVALID_ARGUMENT (bad
     * input), NOT_FOUND (AGENT_NOT_FOUND), FAILED_PRECONDITION
     * (RAG_CONTEXT_BUDGET_EXCEEDED, INVALID_RAG_POLICY, NO_ACCEPTED_CONTEXT),
     * UNAVAILABLE (RAG_RETRIEVAL_FAILED, RERANKER_FAILED, MODEL_UNAVAILABLE,
     * MODEL_RATE_LIMITED, MODEL_INVALID_RESPONSE), DEADLINE_EXCEEDED.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.ExecuteResponse> execute(
        dev.groundwire.v1.ExecuteRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getExecuteMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Runs every RAG stage of one agent turn exactly as Execute would (query
     * rewriting, retrieval, acceptance, reranking, answerability, context
     * budget, prompt assembly) and returns the exact messages and tools the
     * model would receive, with the references and the applied limits, without
     * calling the model ("retrieve without LLM call"). The response exposes
     * the assembled prompt, including the agent's instructions, so it needs the
     * `prepare` permission (EXECUTE alone is not enough). Errors: as Execute,
     * plus PERMISSION_DENIED (PERMISSION_DENIED) without that permission.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.PrepareExecutionResponse> prepareExecution(
        dev.groundwire.v1.PrepareExecutionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getPrepareExecutionMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_LIST_AGENTS = 0;
  private static final int METHODID_GET_AGENT = 1;
  private static final int METHODID_EXECUTE = 2;
  private static final int METHODID_EXECUTE_STREAM = 3;
  private static final int METHODID_PREPARE_EXECUTION = 4;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AsyncService serviceImpl;
    private final int methodId;

    MethodHandlers(AsyncService serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_LIST_AGENTS:
          serviceImpl.listAgents((dev.groundwire.v1.ListAgentsRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.ListAgentsResponse>) responseObserver);
          break;
        case METHODID_GET_AGENT:
          serviceImpl.getAgent((dev.groundwire.v1.GetAgentRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.GetAgentResponse>) responseObserver);
          break;
        case METHODID_EXECUTE:
          serviceImpl.execute((dev.groundwire.v1.ExecuteRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteResponse>) responseObserver);
          break;
        case METHODID_EXECUTE_STREAM:
          serviceImpl.executeStream((dev.groundwire.v1.ExecuteStreamRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteStreamResponse>) responseObserver);
          break;
        case METHODID_PREPARE_EXECUTION:
          serviceImpl.prepareExecution((dev.groundwire.v1.PrepareExecutionRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.PrepareExecutionResponse>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getListAgentsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.ListAgentsRequest,
              dev.groundwire.v1.ListAgentsResponse>(
                service, METHODID_LIST_AGENTS)))
        .addMethod(
          getGetAgentMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.GetAgentRequest,
              dev.groundwire.v1.GetAgentResponse>(
                service, METHODID_GET_AGENT)))
        .addMethod(
          getExecuteMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.ExecuteRequest,
              dev.groundwire.v1.ExecuteResponse>(
                service, METHODID_EXECUTE)))
        .addMethod(
          getExecuteStreamMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              dev.groundwire.v1.ExecuteStreamRequest,
              dev.groundwire.v1.ExecuteStreamResponse>(
                service, METHODID_EXECUTE_STREAM)))
        .addMethod(
          getPrepareExecutionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.PrepareExecutionRequest,
              dev.groundwire.v1.PrepareExecutionResponse>(
                service, METHODID_PREPARE_EXECUTION)))
        .build();
  }

  private static abstract class AgentServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    AgentServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.groundwire.v1.AgentProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("AgentService");
    }
  }

  private static final class AgentServiceFileDescriptorSupplier
      extends AgentServiceBaseDescriptorSupplier {
    AgentServiceFileDescriptorSupplier() {}
  }

  private static final class AgentServiceMethodDescriptorSupplier
      extends AgentServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    AgentServiceMethodDescriptorSupplier(java.lang.String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (AgentServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new AgentServiceFileDescriptorSupplier())
              .addMethod(getListAgentsMethod())
              .addMethod(getGetAgentMethod())
              .addMethod(getExecuteMethod())
              .addMethod(getExecuteStreamMethod())
              .addMethod(getPrepareExecutionMethod())
              .build();
        }
      }
    }
    return result;
  }
}
