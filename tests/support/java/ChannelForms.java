import java.lang.reflect.Method;

import io.aeron.ChannelUri;
import io.aeron.ChannelUriStringBuilder;
import io.aeron.CommonContext;
import io.aeron.driver.media.UdpChannel;

/**
 * What the reference Aeron makes of each channel given as an argument, one line each, tab
 * separated: the channel, UdpChannel.canonicalForm() (udp only, else "-"), the archive's stripped
 * channel (ArchiveConductor.strippedChannelBuilder(...).build(), whose lines are copied here: it
 * is an instance method) and its recording subscription key (ArchiveConductor.makeKey, called).
 * "ERROR <exception>" where Aeron refuses the channel.
 */
public final class ChannelForms
{
    public static void main(final String[] args) throws Exception
    {
        final Method makeKey = Class.forName("io.aeron.archive.ArchiveConductor")
            .getDeclaredMethod("makeKey", int.class, ChannelUri.class);
        makeKey.setAccessible(true);
        for (final String channel : args)
        {
            String canonical;
            try
            {
                canonical = channel.contains("aeron:udp") ? UdpChannel.parse(channel).canonicalForm() : "-";
            }
            catch (final Exception ex)
            {
                canonical = "ERROR " + ex;
            }
            final ChannelUri uri = ChannelUri.parse(channel);
            final String key = (String)makeKey.invoke(null, 0, uri);
            System.out.println(channel + "\t" + canonical + "\t" + stripped(uri) + "\t" + key.substring(2));
        }
    }

    private static String stripped(final ChannelUri channelUri)
    {
        final String sessionIdStr = channelUri.get(CommonContext.SESSION_ID_PARAM_NAME);
        final ChannelUriStringBuilder channelBuilder = new ChannelUriStringBuilder()
            .media(channelUri.media())
            .endpoint(channelUri.get(CommonContext.ENDPOINT_PARAM_NAME))
            .networkInterface(channelUri.get(CommonContext.INTERFACE_PARAM_NAME))
            .controlEndpoint(channelUri.get(CommonContext.MDC_CONTROL_PARAM_NAME))
            .tags(channelUri.get(CommonContext.TAGS_PARAM_NAME))
            .alias(channelUri.get(CommonContext.ALIAS_PARAM_NAME));
        if (null != sessionIdStr)
        {
            channelBuilder.sessionId(Integer.valueOf(sessionIdStr));
        }
        return channelBuilder.build();
    }
}
