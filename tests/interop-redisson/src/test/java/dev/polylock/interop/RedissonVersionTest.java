package dev.polylock.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import org.junit.jupiter.api.Test;
import org.redisson.Redisson;

/**
 * The suite runs once per Redisson line (mk/interop.mk); this checks that the Redisson on the
 * classpath is the one the run was asked for, so a green run of one line never stands for the
 * other.
 */
class RedissonVersionTest {
    @Test
    void theRedissonOnTheClasspathIsTheRequestedVersion() {
        String requested = System.getProperty("redisson.version");
        assertNotNull(requested, "surefire passes -Dredisson.version as a system property");
        assertEquals(requested, Redisson.class.getPackage().getImplementationVersion());
    }
}
