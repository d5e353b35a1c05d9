package dev.groundwire.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Index management and ingestion operations.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class IngestionManagerServiceGrpc {

  private IngestionManagerServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "groundwire.v1.IngestionManagerService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.ListIndexesRequest,
      dev.groundwire.v1.ListIndexesResponse> getListIndexesMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListIndexes",
      requestType = dev.groundwire.v1.ListIndexesRequest.class,
      responseType = dev.groundwire.v1.ListIndexesResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.ListIndexesRequest,
      dev.groundwire.v1.ListIndexesResponse> getListIndexesMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.ListIndexesRequest, dev.groundwire.v1.ListIndexesResponse> getListIndexesMethod;
    if ((getListIndexesMethod = IngestionManagerServiceGrpc.getListIndexesMethod) == null) {
      synchronized (IngestionManagerServiceGrpc.class) {
        if ((getListIndexesMethod = IngestionManagerServiceGrpc.getListIndexesMethod) == null) {
          IngestionManagerServiceGrpc.getListIndexesMethod = getListIndexesMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.ListIndexesRequest, dev.groundwire.v1.ListIndexesResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListIndexes"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ListIndexesRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ListIndexesResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestionManagerServiceMethodDescriptorSupplier("ListIndexes"))
              .build();
        }
      }
    }
    return getListIndexesMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.GetIndexRequest,
      dev.groundwire.v1.GetIndexResponse> getGetIndexMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetIndex",
      requestType = dev.groundwire.v1.GetIndexRequest.class,
      responseType = dev.groundwire.v1.GetIndexResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.GetIndexRequest,
      dev.groundwire.v1.GetIndexResponse> getGetIndexMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.GetIndexRequest, dev.groundwire.v1.GetIndexResponse> getGetIndexMethod;
    if ((getGetIndexMethod = IngestionManagerServiceGrpc.getGetIndexMethod) == null) {
      synchronized (IngestionManagerServiceGrpc.class) {
        if ((getGetIndexMethod = IngestionManagerServiceGrpc.getGetIndexMethod) == null) {
          IngestionManagerServiceGrpc.getGetIndexMethod = getGetIndexMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.GetIndexRequest, dev.groundwire.v1.GetIndexResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetIndex"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.GetIndexRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.GetIndexResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestionManagerServiceMethodDescriptorSupplier("GetIndex"))
              .build();
        }
      }
    }
    return getGetIndexMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.GetIndexStatusRequest,
      dev.groundwire.v1.GetIndexStatusResponse> getGetIndexStatusMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetIndexStatus",
      requestType = dev.groundwire.v1.GetIndexStatusRequest.class,
      responseType = dev.groundwire.v1.GetIndexStatusResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.GetIndexStatusRequest,
      dev.groundwire.v1.GetIndexStatusResponse> getGetIndexStatusMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.GetIndexStatusRequest, dev.groundwire.v1.GetIndexStatusResponse> getGetIndexStatusMethod;
    if ((getGetIndexStatusMethod = IngestionManagerServiceGrpc.getGetIndexStatusMethod) == null) {
      synchronized (IngestionManagerServiceGrpc.class) {
        if ((getGetIndexStatusMethod = IngestionManagerServiceGrpc.getGetIndexStatusMethod) == null) {
          IngestionManagerServiceGrpc.getGetIndexStatusMethod = getGetIndexStatusMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.GetIndexStatusRequest, dev.groundwire.v1.GetIndexStatusResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetIndexStatus"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.GetIndexStatusRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.GetIndexStatusResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestionManagerServiceMethodDescriptorSupplier("GetIndexStatus"))
              .build();
        }
      }
    }
    return getGetIndexStatusMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.StartIngestionRequest,
      dev.groundwire.v1.StartIngestionResponse> getStartIngestionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "StartIngestion",
      requestType = dev.groundwire.v1.StartIngestionRequest.class,
      responseType = dev.groundwire.v1.StartIngestionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.StartIngestionRequest,
      dev.groundwire.v1.StartIngestionResponse> getStartIngestionMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.StartIngestionRequest, dev.groundwire.v1.StartIngestionResponse> getStartIngestionMethod;
    if ((getStartIngestionMethod = IngestionManagerServiceGrpc.getStartIngestionMethod) == null) {
      synchronized (IngestionManagerServiceGrpc.class) {
        if ((getStartIngestionMethod = IngestionManagerServiceGrpc.getStartIngestionMethod) == null) {
          IngestionManagerServiceGrpc.getStartIngestionMethod = getStartIngestionMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.StartIngestionRequest, dev.groundwire.v1.StartIngestionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "StartIngestion"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.StartIngestionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.StartIngestionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestionManagerServiceMethodDescriptorSupplier("StartIngestion"))
              .build();
        }
      }
    }
    return getStartIngestionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.CancelIngestionRequest,
      dev.groundwire.v1.CancelIngestionResponse> getCancelIngestionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CancelIngestion",
      requestType = dev.groundwire.v1.CancelIngestionRequest.class,
      responseType = dev.groundwire.v1.CancelIngestionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.CancelIngestionRequest,
      dev.groundwire.v1.CancelIngestionResponse> getCancelIngestionMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.CancelIngestionRequest, dev.groundwire.v1.CancelIngestionResponse> getCancelIngestionMethod;
    if ((getCancelIngestionMethod = IngestionManagerServiceGrpc.getCancelIngestionMethod) == null) {
      synchronized (IngestionManagerServiceGrpc.class) {
        if ((getCancelIngestionMethod = IngestionManagerServiceGrpc.getCancelIngestionMethod) == null) {
          IngestionManagerServiceGrpc.getCancelIngestionMethod = getCancelIngestionMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.CancelIngestionRequest, dev.groundwire.v1.CancelIngestionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CancelIngestion"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.CancelIngestionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.CancelIngestionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestionManagerServiceMethodDescriptorSupplier("CancelIngestion"))
              .build();
        }
      }
    }
    return getCancelIngestionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.WatchIngestionRequest,
      dev.groundwire.v1.WatchIngestionResponse> getWatchIngestionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "WatchIngestion",
      requestType = dev.groundwire.v1.WatchIngestionRequest.class,
      responseType = dev.groundwire.v1.WatchIngestionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.WatchIngestionRequest,
      dev.groundwire.v1.WatchIngestionResponse> getWatchIngestionMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.WatchIngestionRequest, dev.groundwire.v1.WatchIngestionResponse> getWatchIngestionMethod;
    if ((getWatchIngestionMethod = IngestionManagerServiceGrpc.getWatchIngestionMethod) == null) {
      synchronized (IngestionManagerServiceGrpc.class) {
        if ((getWatchIngestionMethod = IngestionManagerServiceGrpc.getWatchIngestionMethod) == null) {
          IngestionManagerServiceGrpc.getWatchIngestionMethod = getWatchIngestionMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.WatchIngestionRequest, dev.groundwire.v1.WatchIngestionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "WatchIngestion"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.WatchIngestionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.WatchIngestionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestionManagerServiceMethodDescriptorSupplier("WatchIngestion"))
              .build();
        }
      }
    }
    return getWatchIngestionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.ListOperationsRequest,
      dev.groundwire.v1.ListOperationsResponse> getListOperationsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListOperations",
      requestType = dev.groundwire.v1.ListOperationsRequest.class,
      responseType = dev.groundwire.v1.ListOperationsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.ListOperationsRequest,
      dev.groundwire.v1.ListOperationsResponse> getListOperationsMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.ListOperationsRequest, dev.groundwire.v1.ListOperationsResponse> getListOperationsMethod;
    if ((getListOperationsMethod = IngestionManagerServiceGrpc.getListOperationsMethod) == null) {
      synchronized (IngestionManagerServiceGrpc.class) {
        if ((getListOperationsMethod = IngestionManagerServiceGrpc.getListOperationsMethod) == null) {
          IngestionManagerServiceGrpc.getListOperationsMethod = getListOperationsMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.ListOperationsRequest, dev.groundwire.v1.ListOperationsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListOperations"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ListOperationsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ListOperationsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestionManagerServiceMethodDescriptorSupplier("ListOperations"))
              .build();
        }
      }
    }
    return getListOperationsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.UpsertDocumentsRequest,
      dev.groundwire.v1.UpsertDocumentsResponse> getUpsertDocumentsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "UpsertDocuments",
      requestType = dev.groundwire.v1.UpsertDocumentsRequest.class,
      responseType = dev.groundwire.v1.UpsertDocumentsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.UpsertDocumentsRequest,
      dev.groundwire.v1.UpsertDocumentsResponse> getUpsertDocumentsMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.UpsertDocumentsRequest, dev.groundwire.v1.UpsertDocumentsResponse> getUpsertDocumentsMethod;
    if ((getUpsertDocumentsMethod = IngestionManagerServiceGrpc.getUpsertDocumentsMethod) == null) {
      synchronized (IngestionManagerServiceGrpc.class) {
        if ((getUpsertDocumentsMethod = IngestionManagerServiceGrpc.getUpsertDocumentsMethod) == null) {
          IngestionManagerServiceGrpc.getUpsertDocumentsMethod = getUpsertDocumentsMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.UpsertDocumentsRequest, dev.groundwire.v1.UpsertDocumentsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "UpsertDocuments"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.UpsertDocumentsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.UpsertDocumentsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestionManagerServiceMethodDescriptorSupplier("UpsertDocuments"))
              .build();
        }
      }
    }
    return getUpsertDocumentsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.DeleteDocumentsRequest,
      dev.groundwire.v1.DeleteDocumentsResponse> getDeleteDocumentsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DeleteDocuments",
      requestType = dev.groundwire.v1.DeleteDocumentsRequest.class,
      responseType = dev.groundwire.v1.DeleteDocumentsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.DeleteDocumentsRequest,
      dev.groundwire.v1.DeleteDocumentsResponse> getDeleteDocumentsMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.DeleteDocumentsRequest, dev.groundwire.v1.DeleteDocumentsResponse> getDeleteDocumentsMethod;
    if ((getDeleteDocumentsMethod = IngestionManagerServiceGrpc.getDeleteDocumentsMethod) == null) {
      synchronized (IngestionManagerServiceGrpc.class) {
        if ((getDeleteDocumentsMethod = IngestionManagerServiceGrpc.getDeleteDocumentsMethod) == null) {
          IngestionManagerServiceGrpc.getDeleteDocumentsMethod = getDeleteDocumentsMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.DeleteDocumentsRequest, dev.groundwire.v1.DeleteDocumentsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DeleteDocuments"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.DeleteDocumentsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.DeleteDocumentsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestionManagerServiceMethodDescriptorSupplier("DeleteDocuments"))
              .build();
        }
      }
    }
    return getDeleteDocumentsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.ListDocumentsRequest,
      dev.groundwire.v1.ListDocumentsResponse> getListDocumentsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListDocuments",
      requestType = dev.groundwire.v1.ListDocumentsRequest.class,
      responseType = dev.groundwire.v1.ListDocumentsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.ListDocumentsRequest,
      dev.groundwire.v1.ListDocumentsResponse> getListDocumentsMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.ListDocumentsRequest, dev.groundwire.v1.ListDocumentsResponse> getListDocumentsMethod;
    if ((getListDocumentsMethod = IngestionManagerServiceGrpc.getListDocumentsMethod) == null) {
      synchronized (IngestionManagerServiceGrpc.class) {
        if ((getListDocumentsMethod = IngestionManagerServiceGrpc.getListDocumentsMethod) == null) {
          IngestionManagerServiceGrpc.getListDocumentsMethod = getListDocumentsMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.ListDocumentsRequest, dev.groundwire.v1.ListDocumentsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListDocuments"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ListDocumentsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ListDocumentsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestionManagerServiceMethodDescriptorSupplier("ListDocuments"))
              .build();
        }
      }
    }
    return getListDocumentsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.GetDocumentRequest,
      dev.groundwire.v1.GetDocumentResponse> getGetDocumentMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetDocument",
      requestType = dev.groundwire.v1.GetDocumentRequest.class,
      responseType = dev.groundwire.v1.GetDocumentResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.GetDocumentRequest,
      dev.groundwire.v1.GetDocumentResponse> getGetDocumentMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.GetDocumentRequest, dev.groundwire.v1.GetDocumentResponse> getGetDocumentMethod;
    if ((getGetDocumentMethod = IngestionManagerServiceGrpc.getGetDocumentMethod) == null) {
      synchronized (IngestionManagerServiceGrpc.class) {
        if ((getGetDocumentMethod = IngestionManagerServiceGrpc.getGetDocumentMethod) == null) {
          IngestionManagerServiceGrpc.getGetDocumentMethod = getGetDocumentMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.GetDocumentRequest, dev.groundwire.v1.GetDocumentResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetDocument"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.GetDocumentRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.GetDocumentResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestionManagerServiceMethodDescriptorSupplier("GetDocument"))
              .build();
        }
      }
    }
    return getGetDocumentMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static IngestionManagerServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<IngestionManagerServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<IngestionManagerServiceStub>() {
        @java.lang.Override
        public IngestionManagerServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new IngestionManagerServiceStub(channel, callOptions);
        }
      };
    return IngestionManagerServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static IngestionManagerServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<IngestionManagerServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<IngestionManagerServiceBlockingV2Stub>() {
        @java.lang.Override
        public IngestionManagerServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new IngestionManagerServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return IngestionManagerServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static IngestionManagerServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<IngestionManagerServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<IngestionManagerServiceBlockingStub>() {
        @java.lang.Override
        public IngestionManagerServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new IngestionManagerServiceBlockingStub(channel, callOptions);
        }
      };
    return IngestionManagerServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static IngestionManagerServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<IngestionManagerServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<IngestionManagerServiceFutureStub>() {
        @java.lang.Override
        public IngestionManagerServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new IngestionManagerServiceFutureStub(channel, callOptions);
        }
      };
    return IngestionManagerServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Index management and ingestion operations.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Lists the configured indexes, ordered by name. Paginated.
     * </pre>
     */
    default void listIndexes(dev.groundwire.v1.ListIndexesRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ListIndexesResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListIndexesMethod(), responseObserver);
    }

    /**
     * <pre>
     * Describes one index. Errors: NOT_FOUND (INDEX_NOT_FOUND).
     * </pre>
     */
    default void getIndex(dev.groundwire.v1.GetIndexRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.GetIndexResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetIndexMethod(), responseObserver);
    }

    /**
     * <pre>
     * The index's published state and its running/last operation.
     * </pre>
     */
    default void getIndexStatus(dev.groundwire.v1.GetIndexStatusRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.GetIndexStatusResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetIndexStatusMethod(), responseObserver);
    }

    /**
     * <pre>
     * Starts ingesting the index's configured sources. Every index accepts a
     * manual start whatever its strategy. Errors: FAILED_PRECONDITION
     * (INGESTION_ALREADY_RUNNING with the running operation's id in ErrorInfo
     * metadata "operation_id"; INGESTION_LOCKED when another replica ingests).
     * </pre>
     */
    default void startIngestion(dev.groundwire.v1.StartIngestionRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.StartIngestionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getStartIngestionMethod(), responseObserver);
    }

    /**
     * <pre>
     * Cancels the index's running operation; the last published version keeps
     * serving. Errors: FAILED_PRECONDITION (NO_RUNNING_INGESTION).
     * </pre>
     */
    default void cancelIngestion(dev.groundwire.v1.CancelIngestionRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.CancelIngestionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCancelIngestionMethod(), responseObserver);
    }

    /**
     * <pre>
     * Streams progress snapshots of one operation (throttled, at most a few per
     * second, plus every phase change) until it ends; the last message has a
     * terminal state. Errors: NOT_FOUND (OPERATION_NOT_FOUND).
     * </pre>
     */
    default void watchIngestion(dev.groundwire.v1.WatchIngestionRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.WatchIngestionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getWatchIngestionMethod(), responseObserver);
    }

    /**
     * <pre>
     * Lists operations, newest first. Paginated.
     * </pre>
     */
    default void listOperations(dev.groundwire.v1.ListOperationsRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ListOperationsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListOperationsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Adds or replaces documents pushed by the caller and publishes them as one
     * new index version. Unchanged documents (same content hash) are skipped.
     * Documents are identified by (tenant, document_id): a caller only ever
     * addresses its own tenant's documents.
     * </pre>
     */
    default void upsertDocuments(dev.groundwire.v1.UpsertDocumentsRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.UpsertDocumentsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getUpsertDocumentsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Deletes one tenant's pushed or ingested documents by id as one new index
     * version.
     * </pre>
     */
    default void deleteDocuments(dev.groundwire.v1.DeleteDocumentsRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.DeleteDocumentsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDeleteDocumentsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Lists one tenant's published documents of an index, ordered by id
     * (code point order), without their content. Paginated. Needs the `retrieve`
     * permission (like GetDocument): the caller's own tenant only. Errors: NOT_FOUND
     * (INDEX_NOT_FOUND).
     * </pre>
     */
    default void listDocuments(dev.groundwire.v1.ListDocumentsRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ListDocumentsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListDocumentsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Describes one of a tenant's published documents, without its content.
     * Errors: NOT_FOUND (INDEX_NOT_FOUND; DOCUMENT_NOT_FOUND, also for another
     * tenant's document with that id).
     * </pre>
     */
    default void getDocument(dev.groundwire.v1.GetDocumentRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.GetDocumentResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetDocumentMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service IngestionManagerService.
   * <pre>
   * Index management and ingestion operations.
   * </pre>
   */
  public static abstract class IngestionManagerServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return IngestionManagerServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service IngestionManagerService.
   * <pre>
   * Index management and ingestion operations.
   * </pre>
   */
  public static final class IngestionManagerServiceStub
      extends io.grpc.stub.AbstractAsyncStub<IngestionManagerServiceStub> {
    private IngestionManagerServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected IngestionManagerServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new IngestionManagerServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists the configured indexes, ordered by name. Paginated.
     * </pre>
     */
    public void listIndexes(dev.groundwire.v1.ListIndexesRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ListIndexesResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListIndexesMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Describes one index. Errors: NOT_FOUND (INDEX_NOT_FOUND).
     * </pre>
     */
    public void getIndex(dev.groundwire.v1.GetIndexRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.GetIndexResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetIndexMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * The index's published state and its running/last operation.
     * </pre>
     */
    public void getIndexStatus(dev.groundwire.v1.GetIndexStatusRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.GetIndexStatusResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetIndexStatusMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Starts ingesting the index's configured sources. Every index accepts a
     * manual start whatever its strategy. Errors: FAILED_PRECONDITION
     * (INGESTION_ALREADY_RUNNING with the running operation's id in ErrorInfo
     * metadata "operation_id"; INGESTION_LOCKED when another replica ingests).
     * </pre>
     */
    public void startIngestion(dev.groundwire.v1.StartIngestionRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.StartIngestionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getStartIngestionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Cancels the index's running operation; the last published version keeps
     * serving. Errors: FAILED_PRECONDITION (NO_RUNNING_INGESTION).
     * </pre>
     */
    public void cancelIngestion(dev.groundwire.v1.CancelIngestionRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.CancelIngestionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCancelIngestionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Streams progress snapshots of one operation (throttled, at most a few per
     * second, plus every phase change) until it ends; the last message has a
     * terminal state. Errors: NOT_FOUND (OPERATION_NOT_FOUND).
     * </pre>
     */
    public void watchIngestion(dev.groundwire.v1.WatchIngestionRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.WatchIngestionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getWatchIngestionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Lists operations, newest first. Paginated.
     * </pre>
     */
    public void listOperations(dev.groundwire.v1.ListOperationsRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ListOperationsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListOperationsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Adds or replaces documents pushed by the caller and publishes them as one
     * new index version. Unchanged documents (same content hash) are skipped.
     * Documents are identified by (tenant, document_id): a caller only ever
     * addresses its own tenant's documents.
     * </pre>
     */
    public void upsertDocuments(dev.groundwire.v1.UpsertDocumentsRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.UpsertDocumentsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getUpsertDocumentsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Deletes one tenant's pushed or ingested documents by id as one new index
     * version.
     * </pre>
     */
    public void deleteDocuments(dev.groundwire.v1.DeleteDocumentsRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.DeleteDocumentsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDeleteDocumentsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Lists one tenant's published documents of an index, ordered by id
     * (code point order), without their content. Paginated. Needs the `retrieve`
     * permission (like GetDocument): the caller's own tenant only. Errors: NOT_FOUND
     * (INDEX_NOT_FOUND).
     * </pre>
     */
    public void listDocuments(dev.groundwire.v1.ListDocumentsRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ListDocumentsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListDocumentsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Describes one of a tenant's published documents, without its content.
     * Errors: NOT_FOUND (INDEX_NOT_FOUND; DOCUMENT_NOT_FOUND, also for another
     * tenant's document with that id).
     * </pre>
     */
    public void getDocument(dev.groundwire.v1.GetDocumentRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.GetDocumentResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetDocumentMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service IngestionManagerService.
   * <pre>
   * Index management and ingestion operations.
   * </pre>
   */
  public static final class IngestionManagerServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<IngestionManagerServiceBlockingV2Stub> {
    private IngestionManagerServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected IngestionManagerServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new IngestionManagerServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists the configured indexes, ordered by name. Paginated.
     * </pre>
     */
    public dev.groundwire.v1.ListIndexesResponse listIndexes(dev.groundwire.v1.ListIndexesRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListIndexesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Describes one index. Errors: NOT_FOUND (INDEX_NOT_FOUND).
     * </pre>
     */
    public dev.groundwire.v1.GetIndexResponse getIndex(dev.groundwire.v1.GetIndexRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetIndexMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The index's published state and its running/last operation.
     * </pre>
     */
    public dev.groundwire.v1.GetIndexStatusResponse getIndexStatus(dev.groundwire.v1.GetIndexStatusRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetIndexStatusMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Starts ingesting the index's configured sources. Every index accepts a
     * manual start whatever its strategy. Errors: FAILED_PRECONDITION
     * (INGESTION_ALREADY_RUNNING with the running operation's id in ErrorInfo
     * metadata "operation_id"; INGESTION_LOCKED when another replica ingests).
     * </pre>
     */
    public dev.groundwire.v1.StartIngestionResponse startIngestion(dev.groundwire.v1.StartIngestionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getStartIngestionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Cancels the index's running operation; the last published version keeps
     * serving. Errors: FAILED_PRECONDITION (NO_RUNNING_INGESTION).
     * </pre>
     */
    public dev.groundwire.v1.CancelIngestionResponse cancelIngestion(dev.groundwire.v1.CancelIngestionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCancelIngestionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Streams progress snapshots of one operation (throttled, at most a few per
     * second, plus every phase change) until it ends; the last message has a
     * terminal state. Errors: NOT_FOUND (OPERATION_NOT_FOUND).
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, dev.groundwire.v1.WatchIngestionResponse>
        watchIngestion(dev.groundwire.v1.WatchIngestionRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getWatchIngestionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists operations, newest first. Paginated.
     * </pre>
     */
    public dev.groundwire.v1.ListOperationsResponse listOperations(dev.groundwire.v1.ListOperationsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListOperationsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Adds or replaces documents pushed by the caller and publishes them as one
     * new index version. Unchanged documents (same content hash) are skipped.
     * Documents are identified by (tenant, document_id): a caller only ever
     * addresses its own tenant's documents.
     * </pre>
     */
    public dev.groundwire.v1.UpsertDocumentsResponse upsertDocuments(dev.groundwire.v1.UpsertDocumentsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getUpsertDocumentsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes one tenant's pushed or ingested documents by id as one new index
     * version.
     * </pre>
     */
    public dev.groundwire.v1.DeleteDocumentsResponse deleteDocuments(dev.groundwire.v1.DeleteDocumentsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getDeleteDocumentsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists one tenant's published documents of an index, ordered by id
     * (code point order), without their content. Paginated. Needs the `retrieve`
     * permission (like GetDocument): the caller's own tenant only. Errors: NOT_FOUND
     * (INDEX_NOT_FOUND).
     * </pre>
     */
    public dev.groundwire.v1.ListDocumentsResponse listDocuments(dev.groundwire.v1.ListDocumentsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListDocumentsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Describes one of a tenant's published documents, without its content.
     * Errors: NOT_FOUND (INDEX_NOT_FOUND; DOCUMENT_NOT_FOUND, also for another
     * tenant's document with that id).
     * </pre>
     */
    public dev.groundwire.v1.GetDocumentResponse getDocument(dev.groundwire.v1.GetDocumentRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetDocumentMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service IngestionManagerService.
   * <pre>
   * Index management and ingestion operations.
   * </pre>
   */
  public static final class IngestionManagerServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<IngestionManagerServiceBlockingStub> {
    private IngestionManagerServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected IngestionManagerServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new IngestionManagerServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists the configured indexes, ordered by name. Paginated.
     * </pre>
     */
    public dev.groundwire.v1.ListIndexesResponse listIndexes(dev.groundwire.v1.ListIndexesRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListIndexesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Describes one index. Errors: NOT_FOUND (INDEX_NOT_FOUND).
     * </pre>
     */
    public dev.groundwire.v1.GetIndexResponse getIndex(dev.groundwire.v1.GetIndexRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetIndexMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The index's published state and its running/last operation.
     * </pre>
     */
    public dev.groundwire.v1.GetIndexStatusResponse getIndexStatus(dev.groundwire.v1.GetIndexStatusRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetIndexStatusMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Starts ingesting the index's configured sources. Every index accepts a
     * manual start whatever its strategy. Errors: FAILED_PRECONDITION
     * (INGESTION_ALREADY_RUNNING with the running operation's id in ErrorInfo
     * metadata "operation_id"; INGESTION_LOCKED when another replica ingests).
     * </pre>
     */
    public dev.groundwire.v1.StartIngestionResponse startIngestion(dev.groundwire.v1.StartIngestionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getStartIngestionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Cancels the index's running operation; the last published version keeps
     * serving. Errors: FAILED_PRECONDITION (NO_RUNNING_INGESTION).
     * </pre>
     */
    public dev.groundwire.v1.CancelIngestionResponse cancelIngestion(dev.groundwire.v1.CancelIngestionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCancelIngestionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Streams progress snapshots of one operation (throttled, at most a few per
     * second, plus every phase change) until it ends; the last message has a
     * terminal state. Errors: NOT_FOUND (OPERATION_NOT_FOUND).
     * </pre>
     */
    public java.util.Iterator<dev.groundwire.v1.WatchIngestionResponse> watchIngestion(
        dev.groundwire.v1.WatchIngestionRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getWatchIngestionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists operations, newest first. Paginated.
     * </pre>
     */
    public dev.groundwire.v1.ListOperationsResponse listOperations(dev.groundwire.v1.ListOperationsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListOperationsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Adds or replaces documents pushed by the caller and publishes them as one
     * new index version. Unchanged documents (same content hash) are skipped.
     * Documents are identified by (tenant, document_id): a caller only ever
     * addresses its own tenant's documents.
     * </pre>
     */
    public dev.groundwire.v1.UpsertDocumentsResponse upsertDocuments(dev.groundwire.v1.UpsertDocumentsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getUpsertDocumentsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes one tenant's pushed or ingested documents by id as one new index
     * version.
     * </pre>
     */
    public dev.groundwire.v1.DeleteDocumentsResponse deleteDocuments(dev.groundwire.v1.DeleteDocumentsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDeleteDocumentsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists one tenant's published documents of an index, ordered by id
     * (code point order), without their content. Paginated. Needs the `retrieve`
     * permission (like GetDocument): the caller's own tenant only. Errors: NOT_FOUND
     * (INDEX_NOT_FOUND).
     * </pre>
     */
    public dev.groundwire.v1.ListDocumentsResponse listDocuments(dev.groundwire.v1.ListDocumentsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListDocumentsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Describes one of a tenant's published documents, without its content.
     * Errors: NOT_FOUND (INDEX_NOT_FOUND; DOCUMENT_NOT_FOUND, also for another
     * tenant's document with that id).
     * </pre>
     */
    public dev.groundwire.v1.GetDocumentResponse getDocument(dev.groundwire.v1.GetDocumentRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetDocumentMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service IngestionManagerService.
   * <pre>
   * Index management and ingestion operations.
   * </pre>
   */
  public static final class IngestionManagerServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<IngestionManagerServiceFutureStub> {
    private IngestionManagerServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected IngestionManagerServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new IngestionManagerServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists the configured indexes, ordered by name. Paginated.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.ListIndexesResponse> listIndexes(
        dev.groundwire.v1.ListIndexesRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListIndexesMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Describes one index. Errors: NOT_FOUND (INDEX_NOT_FOUND).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.GetIndexResponse> getIndex(
        dev.groundwire.v1.GetIndexRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetIndexMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * The index's published state and its running/last operation.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.GetIndexStatusResponse> getIndexStatus(
        dev.groundwire.v1.GetIndexStatusRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetIndexStatusMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Starts ingesting the index's configured sources. Every index accepts a
     * manual start whatever its strategy. Errors: FAILED_PRECONDITION
     * (INGESTION_ALREADY_RUNNING with the running operation's id in ErrorInfo
     * metadata "operation_id"; INGESTION_LOCKED when another replica ingests).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.StartIngestionResponse> startIngestion(
        dev.groundwire.v1.StartIngestionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getStartIngestionMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Cancels the index's running operation; the last published version keeps
     * serving. Errors: FAILED_PRECONDITION (NO_RUNNING_INGESTION).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.CancelIngestionResponse> cancelIngestion(
        dev.groundwire.v1.CancelIngestionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCancelIngestionMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Lists operations, newest first. Paginated.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.ListOperationsResponse> listOperations(
        dev.groundwire.v1.ListOperationsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListOperationsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Adds or replaces documents pushed by the caller and publishes them as one
     * new index version. Unchanged documents (same content hash) are skipped.
     * Documents are identified by (tenant, document_id): a caller only ever
     * addresses its own tenant's documents.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.UpsertDocumentsResponse> upsertDocuments(
        dev.groundwire.v1.UpsertDocumentsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getUpsertDocumentsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Deletes one tenant's pushed or ingested documents by id as one new index
     * version.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.DeleteDocumentsResponse> deleteDocuments(
        dev.groundwire.v1.DeleteDocumentsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDeleteDocumentsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Lists one tenant's published documents of an index, ordered by id
     * (code point order), without their content. Paginated. Needs the `retrieve`
     * permission (like GetDocument): the caller's own tenant only. Errors: NOT_FOUND
     * (INDEX_NOT_FOUND).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.ListDocumentsResponse> listDocuments(
        dev.groundwire.v1.ListDocumentsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListDocumentsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Describes one of a tenant's published documents, without its content.
     * Errors: NOT_FOUND (INDEX_NOT_FOUND; DOCUMENT_NOT_FOUND, also for another
     * tenant's document with that id).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.GetDocumentResponse> getDocument(
        dev.groundwire.v1.GetDocumentRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetDocumentMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_LIST_INDEXES = 0;
  private static final int METHODID_GET_INDEX = 1;
  private static final int METHODID_GET_INDEX_STATUS = 2;
  private static final int METHODID_START_INGESTION = 3;
  private static final int METHODID_CANCEL_INGESTION = 4;
  private static final int METHODID_WATCH_INGESTION = 5;
  private static final int METHODID_LIST_OPERATIONS = 6;
  private static final int METHODID_UPSERT_DOCUMENTS = 7;
  private static final int METHODID_DELETE_DOCUMENTS = 8;
  private static final int METHODID_LIST_DOCUMENTS = 9;
  private static final int METHODID_GET_DOCUMENT = 10;

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
        case METHODID_LIST_INDEXES:
          serviceImpl.listIndexes((dev.groundwire.v1.ListIndexesRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.ListIndexesResponse>) responseObserver);
          break;
        case METHODID_GET_INDEX:
          serviceImpl.getIndex((dev.groundwire.v1.GetIndexRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.GetIndexResponse>) responseObserver);
          break;
        case METHODID_GET_INDEX_STATUS:
          serviceImpl.getIndexStatus((dev.groundwire.v1.GetIndexStatusRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.GetIndexStatusResponse>) responseObserver);
          break;
        case METHODID_START_INGESTION:
          serviceImpl.startIngestion((dev.groundwire.v1.StartIngestionRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.StartIngestionResponse>) responseObserver);
          break;
        case METHODID_CANCEL_INGESTION:
          serviceImpl.cancelIngestion((dev.groundwire.v1.CancelIngestionRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.CancelIngestionResponse>) responseObserver);
          break;
        case METHODID_WATCH_INGESTION:
          serviceImpl.watchIngestion((dev.groundwire.v1.WatchIngestionRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.WatchIngestionResponse>) responseObserver);
          break;
        case METHODID_LIST_OPERATIONS:
          serviceImpl.listOperations((dev.groundwire.v1.ListOperationsRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.ListOperationsResponse>) responseObserver);
          break;
        case METHODID_UPSERT_DOCUMENTS:
          serviceImpl.upsertDocuments((dev.groundwire.v1.UpsertDocumentsRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.UpsertDocumentsResponse>) responseObserver);
          break;
        case METHODID_DELETE_DOCUMENTS:
          serviceImpl.deleteDocuments((dev.groundwire.v1.DeleteDocumentsRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.DeleteDocumentsResponse>) responseObserver);
          break;
        case METHODID_LIST_DOCUMENTS:
          serviceImpl.listDocuments((dev.groundwire.v1.ListDocumentsRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.ListDocumentsResponse>) responseObserver);
          break;
        case METHODID_GET_DOCUMENT:
          serviceImpl.getDocument((dev.groundwire.v1.GetDocumentRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.GetDocumentResponse>) responseObserver);
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
          getListIndexesMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.ListIndexesRequest,
              dev.groundwire.v1.ListIndexesResponse>(
                service, METHODID_LIST_INDEXES)))
        .addMethod(
          getGetIndexMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.GetIndexRequest,
              dev.groundwire.v1.GetIndexResponse>(
                service, METHODID_GET_INDEX)))
        .addMethod(
          getGetIndexStatusMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.GetIndexStatusRequest,
              dev.groundwire.v1.GetIndexStatusResponse>(
                service, METHODID_GET_INDEX_STATUS)))
        .addMethod(
          getStartIngestionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.StartIngestionRequest,
              dev.groundwire.v1.StartIngestionResponse>(
                service, METHODID_START_INGESTION)))
        .addMethod(
          getCancelIngestionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.CancelIngestionRequest,
              dev.groundwire.v1.CancelIngestionResponse>(
                service, METHODID_CANCEL_INGESTION)))
        .addMethod(
          getWatchIngestionMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              dev.groundwire.v1.WatchIngestionRequest,
              dev.groundwire.v1.WatchIngestionResponse>(
                service, METHODID_WATCH_INGESTION)))
        .addMethod(
          getListOperationsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.ListOperationsRequest,
              dev.groundwire.v1.ListOperationsResponse>(
                service, METHODID_LIST_OPERATIONS)))
        .addMethod(
          getUpsertDocumentsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.UpsertDocumentsRequest,
              dev.groundwire.v1.UpsertDocumentsResponse>(
                service, METHODID_UPSERT_DOCUMENTS)))
        .addMethod(
          getDeleteDocumentsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.DeleteDocumentsRequest,
              dev.groundwire.v1.DeleteDocumentsResponse>(
                service, METHODID_DELETE_DOCUMENTS)))
        .addMethod(
          getListDocumentsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.ListDocumentsRequest,
              dev.groundwire.v1.ListDocumentsResponse>(
                service, METHODID_LIST_DOCUMENTS)))
        .addMethod(
          getGetDocumentMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.GetDocumentRequest,
              dev.groundwire.v1.GetDocumentResponse>(
                service, METHODID_GET_DOCUMENT)))
        .build();
  }

  private static abstract class IngestionManagerServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    IngestionManagerServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.groundwire.v1.IngestionProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("IngestionManagerService");
    }
  }

  private static final class IngestionManagerServiceFileDescriptorSupplier
      extends IngestionManagerServiceBaseDescriptorSupplier {
    IngestionManagerServiceFileDescriptorSupplier() {}
  }

  private static final class IngestionManagerServiceMethodDescriptorSupplier
      extends IngestionManagerServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    IngestionManagerServiceMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (IngestionManagerServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new IngestionManagerServiceFileDescriptorSupplier())
              .addMethod(getListIndexesMethod())
              .addMethod(getGetIndexMethod())
              .addMethod(getGetIndexStatusMethod())
              .addMethod(getStartIngestionMethod())
              .addMethod(getCancelIngestionMethod())
              .addMethod(getWatchIngestionMethod())
              .addMethod(getListOperationsMethod())
              .addMethod(getUpsertDocumentsMethod())
              .addMethod(getDeleteDocumentsMethod())
              .addMethod(getListDocumentsMethod())
              .addMethod(getGetDocumentMethod())
              .build();
        }
      }
    }
    return result;
  }
}
