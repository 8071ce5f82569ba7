package org.deepgreen.dl4j;

/** A failure this stack explains itself: its message is printed as it is. */
final class StackError extends RuntimeException {
    StackError(String message) {
        super(message);
    }
}
