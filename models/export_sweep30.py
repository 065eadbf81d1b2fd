#!/usr/bin/env python3
"""Session 30's generality sweep: tiny random-weight exports of architectures no earlier script in
models/ covers, chosen for their attention forms: DETR (positions added to Q and K only, decoder
cross-attention over the flattened feature map), PVT-v2 (spatial-reduction K/V), MoE decoders
(Mixtral, OLMoE, Qwen2-MoE, Qwen3-MoE), DeepSeek-V2/V3 (multi-head latent attention: q/k as
concat(nope, rope), V's head dim != Q·K's), BLIP-2's Q-Former (cross-attention from learned
queries), Speech2Text, Data2Vec-vision (BEiT relative bias), LayoutLMv3 (1-D + 2-D relative
biases), ConvBERT (attention beside a span-based convolution), Perceiver (latent cross-attention),
Pix2Struct's vision encoder (T5-style, no scale), Hiera (mask-unit attention), Hubert. Both
exporters, ONNX Runtime references; shares export_real.py's export.

  python3 models/export_sweep30.py --out /tmp/s30 [--only detr,pvtv2] [--variants 17ts,18dynamo]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_real as er  # noqa: E402
import export_wider as ew  # noqa: E402

SWEEP30_ARCHS = ["detr", "pvtv2", "mixtral", "olmoe", "qwen2moe", "qwen3moe", "deepseekv2", "deepseekv3",
                 "blip2qformer", "speech2text", "data2vecvision", "layoutlmv3", "convbert", "perceiver",
                 "pix2struct", "hiera", "hubert",
                 # second batch: vision towers of VLMs, newer decoders, detection / video forms
                 "pixtral", "dinov3", "idefics3vision", "modernbertdecoder", "vitdet", "timesformer", "xlnet",
                 "conditionaldetr", "gptoss", "lfm2", "llama4", "git",
                 # third batch: segmentation / detection / document towers
                 "sam2vision", "florence2vision", "blipvision", "donutswin", "swin2sr", "eomt",
                 # fourth batch: seq2seq variants
                 "moonshine", "umt5", "pegasusx",
                 # fifth batch
                 "mask2former", "videomae"]


def build_sweep30(name, torch, tf):
    def Wrap(m):
        return er.first_output_wrap(torch, m)

    common = dict(attn_implementation=er.ATTN)
    g = torch.Generator().manual_seed(0)
    txt = er.text_inputs(torch, vocab=200)
    image = {"pixel_values": torch.randn(er.BATCH, 3, 32, 32, generator=g)}
    dec = dict(vocab_size=200, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=64, **common)
    # MoE experts as a batched gather of each token's expert weights: the default grouped_mm path
    # needs aten::histc, which neither exporter has; the eager loop would trace one routing
    moe = dict(experts_implementation="batched_mm")
    bertish = dict(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                   max_position_embeddings=64, **common)
    if name == "detr":  # sine positions added to Q and K (not V); decoder cross-attention on the feature map
        bb = tf.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                             out_features=["stage2"])
        cfg = tf.DetrConfig(backbone_config=bb, num_queries=4, encoder_layers=1, decoder_layers=1, d_model=32,
                            encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_attention_heads=2,
                            decoder_attention_heads=2, **common)
        return Wrap(tf.DetrModel(cfg)), {"pixel_values": torch.randn(er.BATCH, 3, 64, 64, generator=g)}, "image"
    if name == "pvtv2":  # K/V from a strided-conv reduced sequence (S_q != S_kv)
        cfg = tf.PvtV2Config(image_size=32, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                             hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
                             mlp_ratios=[2, 2])
        return Wrap(tf.PvtV2Model(cfg)), image, "image"
    if name == "mixtral":
        cfg = tf.MixtralConfig(num_local_experts=4, num_experts_per_tok=2, **moe, **dec)
        return Wrap(tf.MixtralModel(cfg)), txt, "text"
    if name == "olmoe":
        cfg = tf.OlmoeConfig(num_experts=4, num_experts_per_tok=2, **moe, **dec)
        return Wrap(tf.OlmoeModel(cfg)), txt, "text"
    if name == "qwen2moe":
        cfg = tf.Qwen2MoeConfig(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                shared_expert_intermediate_size=32, **moe, **dec)
        return Wrap(tf.Qwen2MoeModel(cfg)), txt, "text"
    if name == "qwen3moe":  # per-head q/k norms + MoE
        cfg = tf.Qwen3MoeConfig(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=8, **moe, **dec)
        return Wrap(tf.Qwen3MoeModel(cfg)), txt, "text"
    if name in ("deepseekv2", "deepseekv3"):  # MLA: qk head dim 16 (8 nope + 8 rope), v head dim 12
        mla = dict(kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=12, n_routed_experts=4,
                   num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1, first_k_dense_replace=1)
        d = dict(dec, num_key_value_heads=4)
        if name == "deepseekv2":
            cfg = tf.DeepseekV2Config(q_lora_rank=None, n_group=1, topk_group=1, **mla, **moe, **d)
            return Wrap(tf.DeepseekV2Model(cfg)), txt, "text"
        cfg = tf.DeepseekV3Config(q_lora_rank=24, n_group=1, topk_group=1, **mla, **moe, **d)
        return Wrap(tf.DeepseekV3Model(cfg)), txt, "text"
    if name == "blip2qformer":  # learned queries: self-attention, then cross-attention to image features
        cfg = tf.Blip2QFormerConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                    encoder_hidden_size=48, cross_attention_frequency=1, **common)
        inputs = {"query_embeds": torch.randn(er.BATCH, 4, 32, generator=g),
                  "encoder_hidden_states": torch.randn(er.BATCH, 10, 48, generator=g)}
        return Wrap(tf.Blip2QFormerModel(cfg)), inputs, "image"
    if name == "speech2text":  # conv subsampler + BART-style encoder-decoder
        cfg = tf.Speech2TextConfig(vocab_size=200, d_model=32, encoder_layers=1, decoder_layers=1,
                                   encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                   decoder_ffn_dim=64, max_source_positions=64, max_target_positions=64,
                                   num_conv_layers=2, conv_channels=16, input_feat_per_channel=16, input_channels=1,
                                   pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=2, **common)
        inputs = {"input_features": torch.randn(er.BATCH, 32, 16, generator=g),
                  "decoder_input_ids": torch.randint(3, 200, (er.BATCH, 5), generator=g)}
        return Wrap(tf.Speech2TextModel(cfg)), inputs, "image"
    if name == "data2vecvision":  # BEiT-style shared relative position bias
        cfg = tf.Data2VecVisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                      image_size=32, patch_size=8, use_relative_position_bias=True, **common)
        return Wrap(tf.Data2VecVisionModel(cfg, add_pooling_layer=False)), image, "image"
    if name == "layoutlmv3":  # 1-D and 2-D (x, y) relative position biases, text only
        cfg = tf.LayoutLMv3Config(coordinate_size=4, shape_size=8, visual_embed=False, rel_pos_bins=16,
                                  max_rel_pos=32, rel_2d_pos_bins=16, max_rel_2d_pos=64, **bertish)
        inputs = dict(txt, bbox=torch.randint(0, 500, (er.BATCH, er.SEQ, 4), generator=g).sort(-1).values)
        return Wrap(tf.LayoutLMv3Model(cfg)), inputs, "text"
    if name == "convbert":  # half the heads are span-based dynamic convolution
        cfg = tf.ConvBertConfig(embedding_size=32, head_ratio=2, conv_kernel_size=3, **bertish)
        return Wrap(tf.ConvBertModel(cfg)), txt, "text"
    if name == "perceiver":  # cross-attention from 8 latents to the inputs, then latent self-attention
        cfg = tf.PerceiverConfig(num_latents=8, d_latents=32, d_model=24, num_blocks=1, num_self_attends_per_block=1,
                                 num_self_attention_heads=2, num_cross_attention_heads=1)
        return Wrap(tf.PerceiverModel(cfg)), {"inputs": torch.randn(er.BATCH, 12, 24, generator=g)}, "image"
    if name == "pix2struct":  # T5-style vision encoder: no 1/sqrt(d) scale, key-padding mask
        cfg = tf.Pix2StructVisionConfig(hidden_size=32, patch_embed_hidden_size=48, d_ff=64, d_kv=16,
                                        num_hidden_layers=2, num_attention_heads=2, seq_len=64, **common)
        patches = torch.randn(er.BATCH, 12, 50, generator=g)
        patches[:, :, 0] = torch.arange(12).float() // 4 + 1
        patches[:, :, 1] = torch.arange(12).float() % 4 + 1
        mask = torch.ones(er.BATCH, 12)
        mask[1, 9:] = 0
        return Wrap(tf.Pix2StructVisionModel(cfg)), {"flattened_patches": patches, "attention_mask": mask}, "image"
    if name == "hiera":  # attention within mask units, then global; query pooling between stages
        cfg = tf.HieraConfig(embed_dim=16, image_size=[64, 64], patch_size=[7, 7], patch_stride=[4, 4],
                             patch_padding=[3, 3], depths=[1, 1], num_heads=[1, 2], num_query_pool=1,
                             query_stride=[2, 2], masked_unit_size=[8, 8], masked_unit_attention=[True, False],
                             mlp_ratio=2.0)
        return Wrap(tf.HieraModel(cfg, add_pooling_layer=False)), \
            {"pixel_values": torch.randn(er.BATCH, 3, 64, 64, generator=g)}, "image"
    # ---- second batch: newer vision towers and decoders ----
    if name == "pixtral":  # Pixtral's vision encoder: 2-D rotary on patches, block-diagonal mask per image
        cfg = tf.PixtralVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                     head_dim=16, image_size=32, patch_size=8, **common)
        return Wrap(tf.PixtralVisionModel(cfg)), image, "image"
    if name == "dinov3":  # DINOv3 ViT: rotary on patch tokens, class + register tokens left out of it
        cfg = tf.DINOv3ViTConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                 image_size=32, patch_size=8, num_register_tokens=2, **common)
        return Wrap(tf.DINOv3ViTModel(cfg)), image, "image"
    if name == "idefics3vision":  # SmolVLM / Idefics3's SigLIP-style tower
        cfg = tf.Idefics3VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                      image_size=32, patch_size=8)
        cfg._attn_implementation = er.ATTN
        import transformers.models.idefics3.modeling_idefics3 as mi
        return Wrap(mi.Idefics3VisionTransformer(cfg)), image, "image"
    if name == "modernbertdecoder":  # causal ModernBERT: global + sliding-window (8 keys) layers
        cfg = tf.ModernBertDecoderConfig(vocab_size=200, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=2, max_position_embeddings=64, local_attention=16,
                                         global_attn_every_n_layers=2, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                         cls_token_id=1, sep_token_id=2, **common)
        return Wrap(tf.ModernBertDecoderModel(cfg)), txt, "text"
    if name == "vitdet":  # ViTDet (ViTMatte's backbone): windowed + global blocks, decomposed rel-pos
        cfg = tf.VitDetConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2, image_size=32,
                              pretrain_image_size=32, patch_size=4, window_block_indices=[0], window_size=4,
                              use_relative_position_embeddings=True, out_features=["stage2"])
        return Wrap(tf.VitDetModel(cfg)), image, "image"
    if name == "timesformer":  # divided space-time attention: time then space, with reshapes between
        cfg = tf.TimesformerConfig(image_size=16, patch_size=8, num_frames=2, hidden_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=64)
        return Wrap(tf.TimesformerModel(cfg)), {"pixel_values": torch.randn(er.BATCH, 2, 3, 16, 16, generator=g)}, "image"
    if name == "xlnet":  # two-stream relative attention (content + position + segment terms), einsum spelling
        cfg = tf.XLNetConfig(vocab_size=200, d_model=32, n_layer=2, n_head=2, d_inner=64, mem_len=None,
                             pad_token_id=0, bos_token_id=1, eos_token_id=2)
        return Wrap(tf.XLNetModel(cfg)), txt, "text"
    if name == "conditionaldetr":  # conditional cross-attention: Q, K = concat(content, spatial) per head
        bb = tf.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                             out_features=["stage2"])
        cfg = tf.ConditionalDetrConfig(backbone_config=bb, num_queries=4, encoder_layers=1, decoder_layers=1,
                                       d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_attention_heads=2,
                                       decoder_attention_heads=2, **common)
        return Wrap(tf.ConditionalDetrModel(cfg)), {"pixel_values": torch.randn(er.BATCH, 3, 64, 64, generator=g)}, "image"
    if name == "gptoss":  # attention sinks, alternating sliding / full layers, MoE
        cfg = tf.GptOssConfig(num_local_experts=4, num_experts_per_tok=2, head_dim=8, sliding_window=8,
                              layer_types=["sliding_attention", "full_attention"], **moe, **dec)
        return Wrap(tf.GptOssModel(cfg)), txt, "text"
    if name == "lfm2":  # short convolutions + attention layers with q/k norms
        cfg = tf.Lfm2Config(full_attn_idxs=[1], block_multiple_of=8, **dec)
        return Wrap(tf.Lfm2Model(cfg)), txt, "text"
    if name == "llama4":  # chunked local attention, NoPE global layers, L2-normed q/k, MoE
        cfg = tf.Llama4TextConfig(head_dim=8, num_local_experts=4, num_experts_per_tok=1, intermediate_size_mlp=64,
                                  attention_chunk_size=8, no_rope_layers=[1, 0], interleave_moe_layer_step=1,
                                  **moe, **dec)
        return Wrap(tf.Llama4TextModel(cfg)), txt, "text"
    if name == "git":  # GIT's text decoder alone (no image): causal self-attention, BERT layout
        cfg = tf.GitConfig(vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                              num_attention_heads=2, image_size=32, patch_size=8),
                           vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=64, **common)
        return Wrap(tf.GitModel(cfg)), txt, "text"
    # ---- third batch: segmentation / detection towers users export whole ----
    if name == "sam2vision":  # SAM2's Hiera image encoder: windowed blocks, global blocks, query pooling, FPN neck
        bb = tf.Sam2HieraDetConfig(hidden_size=16, num_attention_heads=1, image_size=[64, 64], patch_kernel_size=[7, 7],
                                   patch_stride=[4, 4], patch_padding=[3, 3], query_stride=[2, 2],
                                   window_positional_embedding_background_size=[4, 4], num_query_pool_stages=1,
                                   blocks_per_stage=[1, 2], embed_dim_per_stage=[16, 32],
                                   num_attention_heads_per_stage=[1, 2], window_size_per_stage=[4, 4],
                                   global_attention_blocks=[2], mlp_ratio=2.0)
        cfg = tf.Sam2VisionConfig(backbone_config=bb, backbone_channel_list=[32, 16], backbone_feature_sizes=[[16, 16], [8, 8]],
                                  fpn_hidden_size=16, fpn_top_down_levels=[0, 1], num_feature_levels=2)
        return Wrap(tf.Sam2VisionModel(cfg)), {"pixel_values": torch.randn(er.BATCH, 3, 64, 64, generator=g)}, "image"
    if name == "florence2vision":  # DaViT: window attention alternating with channel attention (softmax(Kᵀ·V) over channels)
        cfg = tf.Florence2VisionConfig(depths=[1, 1], patch_size=[7, 3], patch_stride=[4, 2], patch_padding=[3, 1],
                                       patch_prenorm=[False, True], embed_dim=[16, 32], num_heads=[2, 2],
                                       num_groups=[2, 2], window_size=4, projection_dim=32)
        import transformers.models.florence2.modeling_florence2 as mf
        return Wrap(mf.Florence2VisionBackbone(cfg)), {"hidden_states": image["pixel_values"]}, "image"
    if name == "blipvision":
        cfg = tf.BlipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                  image_size=32, patch_size=8, **common)
        return Wrap(tf.BlipVisionModel(cfg)), image, "image"
    if name == "donutswin":  # Donut / Nougat's encoder
        cfg = tf.DonutSwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[2, 1], num_heads=[2, 4], window_size=4)
        return Wrap(tf.DonutSwinModel(cfg)), image, "image"
    if name == "swin2sr":  # super-resolution SwinV2 blocks (cosine attention, log-spaced CPB)
        cfg = tf.Swin2SRConfig(image_size=16, embed_dim=16, depths=[2], num_heads=[2], window_size=4, upscale=2)
        return Wrap(tf.Swin2SRModel(cfg)), {"pixel_values": torch.randn(er.BATCH, 3, 16, 16, generator=g)}, "image"
    if name == "eomt":  # encoder-only mask transformer: ViT with query tokens joined late, masked attention
        cfg = tf.EomtConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=32, patch_size=8,
                            num_blocks=1, num_queries=4, num_register_tokens=0)
        return Wrap(tf.EomtForUniversalSegmentation(cfg)), image, "image"
    # ---- fourth batch: seq2seq variants ----
    if name == "moonshine":  # speech encoder-decoder, partial rotary in both stacks
        cfg = tf.MoonshineConfig(vocab_size=200, hidden_size=32, intermediate_size=64, encoder_num_hidden_layers=1,
                                 decoder_num_hidden_layers=1, encoder_num_attention_heads=2,
                                 decoder_num_attention_heads=2, max_position_embeddings=64, pad_token_id=0,
                                 bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, **common)
        inputs = {"input_values": torch.randn(er.BATCH, 4000, generator=g),
                  "decoder_input_ids": torch.randint(3, 200, (er.BATCH, 5), generator=g)}
        return Wrap(tf.MoonshineModel(cfg)), inputs, "image"
    if name == "umt5":  # T5 with a relative position bias per layer
        cfg = tf.UMT5Config(vocab_size=200, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                            relative_attention_num_buckets=8, relative_attention_max_distance=16,
                            decoder_start_token_id=0, **common)
        return er.bart_wrap(torch, tf.UMT5Model(cfg)), txt, "text"
    if name == "pegasusx":  # block-local attention with global tokens, staggered blocks
        cfg = tf.PegasusXConfig(vocab_size=200, d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=2,
                                decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                max_position_embeddings=64, num_global_tokens=4, block_size=8,
                                stagger_local_blocks=True, pad_token_id=0, decoder_start_token_id=0)
        return er.bart_wrap(torch, tf.PegasusXModel(cfg)), txt, "text"
    # ---- fifth batch ----
    if name == "mask2former":  # masked attention in the transformer decoder (mask from the predicted masks)
        bb = tf.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2],
                           window_size=2, out_features=["stage1", "stage2", "stage3", "stage4"])
        cfg = tf.Mask2FormerConfig(backbone_config=bb, feature_size=32, mask_feature_size=32, hidden_dim=32,
                                   encoder_feedforward_dim=32, encoder_layers=1, decoder_layers=2, num_attention_heads=2,
                                   dim_feedforward=32, num_queries=4, common_stride=4)
        return Wrap(tf.Mask2FormerModel(cfg)), {"pixel_values": torch.randn(er.BATCH, 3, 64, 64, generator=g)}, "image"
    if name == "videomae":
        cfg = tf.VideoMAEConfig(image_size=16, patch_size=8, num_frames=4, tubelet_size=2, hidden_size=32,
                                num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, **common)
        return Wrap(tf.VideoMAEModel(cfg)), {"pixel_values": torch.randn(er.BATCH, 4, 3, 16, 16, generator=g)}, "image"
    return ew.build_wider(name, torch, tf)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/tmp/s30")
    ap.add_argument("--only", default="")
    ap.add_argument("--variants", default="17ts,18dynamo")
    ap.add_argument("--attn", default="eager")
    a = ap.parse_args()
    er.ATTN, er.DTYPE = a.attn, "fp32"
    import torch
    import transformers as tf
    er.build = build_sweep30  # export_one builds through export_real's global
    archs = a.only.split(",") if a.only else SWEEP30_ARCHS
    jobs = [(arch, op, ex) for arch in archs for op, ex in er.parse_variants(a.variants, er.VARIANTS)]
    failures = er.run_exports(jobs, lambda arch, op, ex: er.export_one(arch, op, ex, a.out, torch, tf), torch)
    return 1 if failures == len(jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
