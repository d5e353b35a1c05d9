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

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.ResumeExecutionRequest,
      dev.groundwire.v1.ResumeExecutionResponse> getResumeExecutionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ResumeExecution",
      requestType = dev.groundwire.v1.ResumeExecutionRequest.class,
      responseType = dev.groundwire.v1.ResumeExecutionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.ResumeExecutionRequest,
      dev.groundwire.v1.ResumeExecutionResponse> getResumeExecutionMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.ResumeExecutionRequest, dev.groundwire.v1.ResumeExecutionResponse> getResumeExecutionMethod;
    if ((getResumeExecutionMethod = AgentServiceGrpc.getResumeExecutionMethod) == null) {
      synchronized (AgentServiceGrpc.class) {
        if ((getResumeExecutionMethod = AgentServiceGrpc.getResumeExecutionMethod) == null) {
          AgentServiceGrpc.getResumeExecutionMethod = getResumeExecutionMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.ResumeExecutionRequest, dev.groundwire.v1.ResumeExecutionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ResumeExecution"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ResumeExecutionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ResumeExecutionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AgentServiceMethodDescriptorSupplier("ResumeExecution"))
              .build();
        }
      }
    }
    return getResumeExecutionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.ResumeExecutionStreamRequest,
      dev.groundwire.v1.ResumeExecutionStreamResponse> getResumeExecutionStreamMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ResumeExecutionStream",
      requestType = dev.groundwire.v1.ResumeExecutionStreamRequest.class,
      responseType = dev.groundwire.v1.ResumeExecutionStreamResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.ResumeExecutionStreamRequest,
      dev.groundwire.v1.ResumeExecutionStreamResponse> getResumeExecutionStreamMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.ResumeExecutionStreamRequest, dev.groundwire.v1.ResumeExecutionStreamResponse> getResumeExecutionStreamMethod;
    if ((getResumeExecutionStreamMethod = AgentServiceGrpc.getResumeExecutionStreamMethod) == null) {
      synchronized (AgentServiceGrpc.class) {
        if ((getResumeExecutionStreamMethod = AgentServiceGrpc.getResumeExecutionStreamMethod) == null) {
          AgentServiceGrpc.getResumeExecutionStreamMethod = getResumeExecutionStreamMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.ResumeExecutionStreamRequest, dev.groundwire.v1.ResumeExecutionStreamResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ResumeExecutionStream"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ResumeExecutionStreamRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ResumeExecutionStreamResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AgentServiceMethodDescriptorSupplier("ResumeExecutionStream"))
              .build();
        }
      }
    }
    return getResumeExecutionStreamMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.SubmitToolResultsRequest,
      dev.groundwire.v1.SubmitToolResultsResponse> getSubmitToolResultsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "SubmitToolResults",
      requestType = dev.groundwire.v1.SubmitToolResultsRequest.class,
      responseType = dev.groundwire.v1.SubmitToolResultsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.SubmitToolResultsRequest,
      dev.groundwire.v1.SubmitToolResultsResponse> getSubmitToolResultsMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.SubmitToolResultsRequest, dev.groundwire.v1.SubmitToolResultsResponse> getSubmitToolResultsMethod;
    if ((getSubmitToolResultsMethod = AgentServiceGrpc.getSubmitToolResultsMethod) == null) {
      synchronized (AgentServiceGrpc.class) {
        if ((getSubmitToolResultsMethod = AgentServiceGrpc.getSubmitToolResultsMethod) == null) {
          AgentServiceGrpc.getSubmitToolResultsMethod = getSubmitToolResultsMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.SubmitToolResultsRequest, dev.groundwire.v1.SubmitToolResultsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "SubmitToolResults"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.SubmitToolResultsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.SubmitToolResultsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AgentServiceMethodDescriptorSupplier("SubmitToolResults"))
              .build();
        }
      }
    }
    return getSubmitToolResultsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.ExecuteInteractiveRequest,
      dev.groundwire.v1.ExecuteInteractiveResponse> getExecuteInteractiveMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ExecuteInteractive",
      requestType = dev.groundwire.v1.ExecuteInteractiveRequest.class,
      responseType = dev.groundwire.v1.ExecuteInteractiveResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.ExecuteInteractiveRequest,
      dev.groundwire.v1.ExecuteInteractiveResponse> getExecuteInteractiveMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.ExecuteInteractiveRequest, dev.groundwire.v1.ExecuteInteractiveResponse> getExecuteInteractiveMethod;
    if ((getExecuteInteractiveMethod = AgentServiceGrpc.getExecuteInteractiveMethod) == null) {
      synchronized (AgentServiceGrpc.class) {
        if ((getExecuteInteractiveMethod = AgentServiceGrpc.getExecuteInteractiveMethod) == null) {
          AgentServiceGrpc.getExecuteInteractiveMethod = getExecuteInteractiveMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.ExecuteInteractiveRequest, dev.groundwire.v1.ExecuteInteractiveResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ExecuteInteractive"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ExecuteInteractiveRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ExecuteInteractiveResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AgentServiceMethodDescriptorSupplier("ExecuteInteractive"))
              .build();
        }
      }
    }
    return getExecuteInteractiveMethod;
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
     * MODEL_RATE_LIMITED, MODEL_INVALID_RESPONSE), DEADLINE_EXCEEDED. An
     * execution that failed after its checkpoint (from the first model call on)
     * names itself in ErrorInfo.metadata["execution_id"], for ResumeExecution.
     * A failed execution of a RAG agent carries its partial RagExecutionMetadata
     * as an additional google.rpc.Status detail.
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
     * reported by exactly one terminal event (completed, failed, or requires
     * action when the model called a client tool).
     * </pre>
     */
    default void executeStream(dev.groundwire.v1.ExecuteStreamRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteStreamResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getExecuteStreamMethod(), responseObserver);
    }

    /**
     * <pre>
     * Continues an execution from its checkpoint, by execution id. Every
     * execution that reached its first model call has one (kept for the server's
     * checkpoint retention, one hour by default): the input, the accepted context
     * with its scores and full RAG metadata, the index version, the tool calls and
     * model messages so far. Resuming repeats no retrieval and no reranking: the
     * result carries the same evidence and metadata (rag.index_version names the
     * version the evidence came from, even when the index has moved on).
     * A completed execution returns its recorded result; one waiting for client
     * tool results returns its REQUIRES_ACTION result again.
     * Errors: NOT_FOUND (EXECUTION_NOT_FOUND: unknown, expired, or another
     * tenant's id; indistinguishable), ABORTED (EXECUTION_IN_PROGRESS: it runs
     * now, here or on another replica; retry after the RetryInfo delay),
     * FAILED_PRECONDITION (EXECUTION_AGENT_CHANGED, TOOL_RESULTS_EXPIRED), and
     * the errors of Execute from the model call on.
     * </pre>
     */
    default void resumeExecution(dev.groundwire.v1.ResumeExecutionRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ResumeExecutionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getResumeExecutionMethod(), responseObserver);
    }

    /**
     * <pre>
     * ResumeExecution, streaming the continued execution's events:
     * EXECUTION_STARTED, EXECUTION_RESUMED, then the events of the model loop and
     * exactly one terminal event. Lookup errors end the call with a status before
     * any event.
     * </pre>
     */
    default void resumeExecutionStream(dev.groundwire.v1.ResumeExecutionStreamRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ResumeExecutionStreamResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getResumeExecutionStreamMethod(), responseObserver);
    }

    /**
     * <pre>
     * Submits the results of client-executed tools of an execution in
     * REQUIRES_ACTION and continues it, returning its next result (completed, or
     * REQUIRES_ACTION again when the model calls client tools again). Every
     * required call must be answered exactly once, before the result's
     * action_deadline. Errors: NOT_FOUND (EXECUTION_NOT_FOUND), INVALID_ARGUMENT
     * (TOOL_RESULT_UNKNOWN_CALL, TOOL_RESULTS_INCOMPLETE, TOOL_RESULT_DUPLICATE
     * within one request, FIELD_TOO_LONG, FIELD_REQUIRED), ALREADY_EXISTS
     * (TOOL_RESULT_DUPLICATE: already submitted), FAILED_PRECONDITION
     * (EXECUTION_NOT_AWAITING_TOOL_RESULTS, TOOL_RESULTS_EXPIRED,
     * EXECUTION_AGENT_CHANGED), ABORTED (EXECUTION_IN_PROGRESS), and the errors
     * of Execute from the model call on.
     * </pre>
     */
    default void submitToolResults(dev.groundwire.v1.SubmitToolResultsRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.SubmitToolResultsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSubmitToolResultsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Runs one agent turn over one bidirectional stream: the first request
     * carries the input; whenever the model calls a client tool the server sends
     * TOOL_CALL_REQUESTED events and waits (bounded by the per-call timeout) for
     * the caller's results on the same stream, then continues. A result not
     * sent in time is returned to the model as the tool error TOOL_TIMEOUT.
     * Results for unknown or already answered calls, or a second input, end the
     * execution with EXECUTION_FAILED (TOOL_RESULT_UNKNOWN_CALL,
     * TOOL_RESULT_DUPLICATE, FIELD_REQUIRED).
     * </pre>
     */
    default io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteInteractiveRequest> executeInteractive(
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteInteractiveResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getExecuteInteractiveMethod(), responseObserver);
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
     * MODEL_RATE_LIMITED, MODEL_INVALID_RESPONSE), DEADLINE_EXCEEDED. An
     * execution that failed after its checkpoint (from the first model call on)
     * names itself in ErrorInfo.metadata["execution_id"], for ResumeExecution.
     * A failed execution of a RAG agent carries its partial RagExecutionMetadata
     * as an additional google.rpc.Status detail.
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
     * reported by exactly one terminal event (completed, failed, or requires
     * action when the model called a client tool).
     * </pre>
     */
    public void executeStream(dev.groundwire.v1.ExecuteStreamRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteStreamResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getExecuteStreamMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Continues an execution from its checkpoint, by execution id. Every
     * execution that reached its first model call has one (kept for the server's
     * checkpoint retention, one hour by default): the input, the accepted context
     * with its scores and full RAG metadata, the index version, the tool calls and
     * model messages so far. Resuming repeats no retrieval and no reranking: the
     * result carries the same evidence and metadata (rag.index_version names the
     * version the evidence came from, even when the index has moved on).
     * A completed execution returns its recorded result; one waiting for client
     * tool results returns its REQUIRES_ACTION result again.
     * Errors: NOT_FOUND (EXECUTION_NOT_FOUND: unknown, expired, or another
     * tenant's id; indistinguishable), ABORTED (EXECUTION_IN_PROGRESS: it runs
     * now, here or on another replica; retry after the RetryInfo delay),
     * FAILED_PRECONDITION (EXECUTION_AGENT_CHANGED, TOOL_RESULTS_EXPIRED), and
     * the errors of Execute from the model call on.
     * </pre>
     */
    public void resumeExecution(dev.groundwire.v1.ResumeExecutionRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ResumeExecutionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getResumeExecutionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * ResumeExecution, streaming the continued execution's events:
     * EXECUTION_STARTED, EXECUTION_RESUMED, then the events of the model loop and
     * exactly one terminal event. Lookup errors end the call with a status before
     * any event.
     * </pre>
     */
    public void resumeExecutionStream(dev.groundwire.v1.ResumeExecutionStreamRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ResumeExecutionStreamResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getResumeExecutionStreamMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Submits the results of client-executed tools of an execution in
     * REQUIRES_ACTION and continues it, returning its next result (completed, or
     * REQUIRES_ACTION again when the model calls client tools again). Every
     * required call must be answered exactly once, before the result's
     * action_deadline. Errors: NOT_FOUND (EXECUTION_NOT_FOUND), INVALID_ARGUMENT
     * (TOOL_RESULT_UNKNOWN_CALL, TOOL_RESULTS_INCOMPLETE, TOOL_RESULT_DUPLICATE
     * within one request, FIELD_TOO_LONG, FIELD_REQUIRED), ALREADY_EXISTS
     * (TOOL_RESULT_DUPLICATE: already submitted), FAILED_PRECONDITION
     * (EXECUTION_NOT_AWAITING_TOOL_RESULTS, TOOL_RESULTS_EXPIRED,
     * EXECUTION_AGENT_CHANGED), ABORTED (EXECUTION_IN_PROGRESS), and the errors
     * of Execute from the model call on.
     * </pre>
     */
    public void submitToolResults(dev.groundwire.v1.SubmitToolResultsRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.SubmitToolResultsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getSubmitToolResultsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Runs one agent turn over one bidirectional stream: the first request
     * carries the input; whenever the model calls a client tool the server sends
     * TOOL_CALL_REQUESTED events and waits (bounded by the per-call timeout) for
     * the caller's results on the same stream, then continues. A result not
     * sent in time is returned to the model as the tool error TOOL_TIMEOUT.
     * Results for unknown or already answered calls, or a second input, end the
     * execution with EXECUTION_FAILED (TOOL_RESULT_UNKNOWN_CALL,
     * TOOL_RESULT_DUPLICATE, FIELD_REQUIRED).
     * </pre>
     */
    public io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteInteractiveRequest> executeInteractive(
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteInteractiveResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncBidiStreamingCall(
          getChannel().newCall(getExecuteInteractiveMethod(), getCallOptions()), responseObserver);
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
     * MODEL_RATE_LIMITED, MODEL_INVALID_RESPONSE), DEADLINE_EXCEEDED. An
     * execution that failed after its checkpoint (from the first model call on)
     * names itself in ErrorInfo.metadata["execution_id"], for ResumeExecution.
     * A failed execution of a RAG agent carries its partial RagExecutionMetadata
     * as an additional google.rpc.Status detail.
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
     * reported by exactly one terminal event (completed, failed, or requires
     * action when the model called a client tool).
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
     * Continues an execution from its checkpoint, by execution id. Every
     * execution that reached its first model call has one (kept for the server's
     * checkpoint retention, one hour by default): the input, the accepted context
     * with its scores and full RAG metadata, the index version, the tool calls and
     * model messages so far. Resuming repeats no retrieval and no reranking: the
     * result carries the same evidence and metadata (rag.index_version names the
     * version the evidence came from, even when the index has moved on).
     * A completed execution returns its recorded result; one waiting for client
     * tool results returns its REQUIRES_ACTION result again.
     * Errors: NOT_FOUND (EXECUTION_NOT_FOUND: unknown, expired, or another
     * tenant's id; indistinguishable), ABORTED (EXECUTION_IN_PROGRESS: it runs
     * now, here or on another replica; retry after the RetryInfo delay),
     * FAILED_PRECONDITION (EXECUTION_AGENT_CHANGED, TOOL_RESULTS_EXPIRED), and
     * the errors of Execute from the model call on.
     * </pre>
     */
    public dev.groundwire.v1.ResumeExecutionResponse resumeExecution(dev.groundwire.v1.ResumeExecutionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getResumeExecutionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ResumeExecution, streaming the continued execution's events:
     * EXECUTION_STARTED, EXECUTION_RESUMED, then the events of the model loop and
     * exactly one terminal event. Lookup errors end the call with a status before
     * any event.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, dev.groundwire.v1.ResumeExecutionStreamResponse>
        resumeExecutionStream(dev.groundwire.v1.ResumeExecutionStreamRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getResumeExecutionStreamMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Submits the results of client-executed tools of an execution in
     * REQUIRES_ACTION and continues it, returning its next result (completed, or
     * REQUIRES_ACTION again when the model calls client tools again). Every
     * required call must be answered exactly once, before the result's
     * action_deadline. Errors: NOT_FOUND (EXECUTION_NOT_FOUND), INVALID_ARGUMENT
     * (TOOL_RESULT_UNKNOWN_CALL, TOOL_RESULTS_INCOMPLETE, TOOL_RESULT_DUPLICATE
     * within one request, FIELD_TOO_LONG, FIELD_REQUIRED), ALREADY_EXISTS
     * (TOOL_RESULT_DUPLICATE: already submitted), FAILED_PRECONDITION
     * (EXECUTION_NOT_AWAITING_TOOL_RESULTS, TOOL_RESULTS_EXPIRED,
     * EXECUTION_AGENT_CHANGED), ABORTED (EXECUTION_IN_PROGRESS), and the errors
     * of Execute from the model call on.
     * </pre>
     */
    public dev.groundwire.v1.SubmitToolResultsResponse submitToolResults(dev.groundwire.v1.SubmitToolResultsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getSubmitToolResultsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs one agent turn over one bidirectional stream: the first request
     * carries the input; whenever the model calls a client tool the server sends
     * TOOL_CALL_REQUESTED events and waits (bounded by the per-call timeout) for
     * the caller's results on the same stream, then continues. A result not
     * sent in time is returned to the model as the tool error TOOL_TIMEOUT.
     * Results for unknown or already answered calls, or a second input, end the
     * execution with EXECUTION_FAILED (TOOL_RESULT_UNKNOWN_CALL,
     * TOOL_RESULT_DUPLICATE, FIELD_REQUIRED).
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<dev.groundwire.v1.ExecuteInteractiveRequest, dev.groundwire.v1.ExecuteInteractiveResponse>
        executeInteractive() {
      return io.grpc.stub.ClientCalls.blockingBidiStreamingCall(
          getChannel(), getExecuteInteractiveMethod(), getCallOptions());
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
     * MODEL_RATE_LIMITED, MODEL_INVALID_RESPONSE), DEADLINE_EXCEEDED. An
     * execution that failed after its checkpoint (from the first model call on)
     * names itself in ErrorInfo.metadata["execution_id"], for ResumeExecution.
     * A failed execution of a RAG agent carries its partial RagExecutionMetadata
     * as an additional google.rpc.Status detail.
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
     * reported by exactly one terminal event (completed, failed, or requires
     * action when the model called a client tool).
     * </pre>
     */
    public java.util.Iterator<dev.groundwire.v1.ExecuteStreamResponse> executeStream(
        dev.groundwire.v1.ExecuteStreamRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getExecuteStreamMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Continues an execution from its checkpoint, by execution id. Every
     * execution that reached its first model call has one (kept for the server's
     * checkpoint retention, one hour by default): the input, the accepted context
     * with its scores and full RAG metadata, the index version, the tool calls and
     * model messages so far. Resuming repeats no retrieval and no reranking: the
     * result carries the same evidence and metadata (rag.index_version names the
     * version the evidence came from, even when the index has moved on).
     * A completed execution returns its recorded result; one waiting for client
     * tool results returns its REQUIRES_ACTION result again.
     * Errors: NOT_FOUND (EXECUTION_NOT_FOUND: unknown, expired, or another
     * tenant's id; indistinguishable), ABORTED (EXECUTION_IN_PROGRESS: it runs
     * now, here or on another replica; retry after the RetryInfo delay),
     * FAILED_PRECONDITION (EXECUTION_AGENT_CHANGED, TOOL_RESULTS_EXPIRED), and
     * the errors of Execute from the model call on.
     * </pre>
     */
    public dev.groundwire.v1.ResumeExecutionResponse resumeExecution(dev.groundwire.v1.ResumeExecutionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getResumeExecutionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ResumeExecution, streaming the continued execution's events:
     * EXECUTION_STARTED, EXECUTION_RESUMED, then the events of the model loop and
     * exactly one terminal event. Lookup errors end the call with a status before
     * any event.
     * </pre>
     */
    public java.util.Iterator<dev.groundwire.v1.ResumeExecutionStreamResponse> resumeExecutionStream(
        dev.groundwire.v1.ResumeExecutionStreamRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getResumeExecutionStreamMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Submits the results of client-executed tools of an execution in
     * REQUIRES_ACTION and continues it, returning its next result (completed, or
     * REQUIRES_ACTION again when the model calls client tools again). Every
     * required call must be answered exactly once, before the result's
     * action_deadline. Errors: NOT_FOUND (EXECUTION_NOT_FOUND), INVALID_ARGUMENT
     * (TOOL_RESULT_UNKNOWN_CALL, TOOL_RESULTS_INCOMPLETE, TOOL_RESULT_DUPLICATE
     * within one request, FIELD_TOO_LONG, FIELD_REQUIRED), ALREADY_EXISTS
     * (TOOL_RESULT_DUPLICATE: already submitted), FAILED_PRECONDITION
     * (EXECUTION_NOT_AWAITING_TOOL_RESULTS, TOOL_RESULTS_EXPIRED,
     * EXECUTION_AGENT_CHANGED), ABORTED (EXECUTION_IN_PROGRESS), and the errors
     * of Execute from the model call on.
     * </pre>
     */
    public dev.groundwire.v1.SubmitToolResultsResponse submitToolResults(dev.groundwire.v1.SubmitToolResultsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getSubmitToolResultsMethod(), getCallOptions(), request);
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
     * MODEL_RATE_LIMITED, MODEL_INVALID_RESPONSE), DEADLINE_EXCEEDED. An
     * execution that failed after its checkpoint (from the first model call on)
     * names itself in ErrorInfo.metadata["execution_id"], for ResumeExecution.
     * A failed execution of a RAG agent carries its partial RagExecutionMetadata
     * as an additional google.rpc.Status detail.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.ExecuteResponse> execute(
        dev.groundwire.v1.ExecuteRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getExecuteMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Continues an execution from its checkpoint, by execution id. Every
     * execution that reached its first model call has one (kept for the server's
     * checkpoint retention, one hour by default): the input, the accepted context
     * with its scores and full RAG metadata, the index version, the tool calls and
     * model messages so far. Resuming repeats no retrieval and no reranking: the
     * result carries the same evidence and metadata (rag.index_version names the
     * version the evidence came from, even when the index has moved on).
     * A completed execution returns its recorded result; one waiting for client
     * tool results returns its REQUIRES_ACTION result again.
     * Errors: NOT_FOUND (EXECUTION_NOT_FOUND: unknown, expired, or another
     * tenant's id; indistinguishable), ABORTED (EXECUTION_IN_PROGRESS: it runs
     * now, here or on another replica; retry after the RetryInfo delay),
     * FAILED_PRECONDITION (EXECUTION_AGENT_CHANGED, TOOL_RESULTS_EXPIRED), and
     * the errors of Execute from the model call on.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.ResumeExecutionResponse> resumeExecution(
        dev.groundwire.v1.ResumeExecutionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getResumeExecutionMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Submits the results of client-executed tools of an execution in
     * REQUIRES_ACTION and continues it, returning its next result (completed, or
     * REQUIRES_ACTION again when the model calls client tools again). Every
     * required call must be answered exactly once, before the result's
     * action_deadline. Errors: NOT_FOUND (EXECUTION_NOT_FOUND), INVALID_ARGUMENT
     * (TOOL_RESULT_UNKNOWN_CALL, TOOL_RESULTS_INCOMPLETE, TOOL_RESULT_DUPLICATE
     * within one request, FIELD_TOO_LONG, FIELD_REQUIRED), ALREADY_EXISTS
     * (TOOL_RESULT_DUPLICATE: already submitted), FAILED_PRECONDITION
     * (EXECUTION_NOT_AWAITING_TOOL_RESULTS, TOOL_RESULTS_EXPIRED,
     * EXECUTION_AGENT_CHANGED), ABORTED (EXECUTION_IN_PROGRESS), and the errors
     * of Execute from the model call on.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.SubmitToolResultsResponse> submitToolResults(
        dev.groundwire.v1.SubmitToolResultsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getSubmitToolResultsMethod(), getCallOptions()), request);
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
  private static final int METHODID_RESUME_EXECUTION = 4;
  private static final int METHODID_RESUME_EXECUTION_STREAM = 5;
  private static final int METHODID_SUBMIT_TOOL_RESULTS = 6;
  private static final int METHODID_PREPARE_EXECUTION = 7;
  private static final int METHODID_EXECUTE_INTERACTIVE = 8;

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
        case METHODID_RESUME_EXECUTION:
          serviceImpl.resumeExecution((dev.groundwire.v1.ResumeExecutionRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.ResumeExecutionResponse>) responseObserver);
          break;
        case METHODID_RESUME_EXECUTION_STREAM:
          serviceImpl.resumeExecutionStream((dev.groundwire.v1.ResumeExecutionStreamRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.ResumeExecutionStreamResponse>) responseObserver);
          break;
        case METHODID_SUBMIT_TOOL_RESULTS:
          serviceImpl.submitToolResults((dev.groundwire.v1.SubmitToolResultsRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.SubmitToolResultsResponse>) responseObserver);
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
        case METHODID_EXECUTE_INTERACTIVE:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.executeInteractive(
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.ExecuteInteractiveResponse>) responseObserver);
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
          getResumeExecutionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.ResumeExecutionRequest,
              dev.groundwire.v1.ResumeExecutionResponse>(
                service, METHODID_RESUME_EXECUTION)))
        .addMethod(
          getResumeExecutionStreamMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              dev.groundwire.v1.ResumeExecutionStreamRequest,
              dev.groundwire.v1.ResumeExecutionStreamResponse>(
                service, METHODID_RESUME_EXECUTION_STREAM)))
        .addMethod(
          getSubmitToolResultsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.SubmitToolResultsRequest,
              dev.groundwire.v1.SubmitToolResultsResponse>(
                service, METHODID_SUBMIT_TOOL_RESULTS)))
        .addMethod(
          getExecuteInteractiveMethod(),
          io.grpc.stub.ServerCalls.asyncBidiStreamingCall(
            new MethodHandlers<
              dev.groundwire.v1.ExecuteInteractiveRequest,
              dev.groundwire.v1.ExecuteInteractiveResponse>(
                service, METHODID_EXECUTE_INTERACTIVE)))
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
              .addMethod(getResumeExecutionMethod())
              .addMethod(getResumeExecutionStreamMethod())
              .addMethod(getSubmitToolResultsMethod())
              .addMethod(getExecuteInteractiveMethod())
              .addMethod(getPrepareExecutionMethod())
              .build();
        }
      }
    }
    return result;
  }
}
